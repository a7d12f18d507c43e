"""Benchmark of distributed sweeps: 1 vs 2 Celery worker processes, and the Celery path vs the in-process path.

Run from the repo root: ``.venv/bin/python bench/bench_celery.py [--archs 40] [--fake]``. Starts a private
redis-server and SQLite database under a temp dir; workers are ``compat worker`` processes as in docker-compose.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BIN = Path(sys.executable).parent


def cpu_bound(entry, device, checks, *, seed=0, workdir=None, emit=None):  # noqa: ANN001, ANN201
    """--fake: COMPAT_RUN_HOOK=bench_celery:cpu_bound; a fixed amount of pure-Python work per architecture,
    holding one core like a real architecture, so the 1-vs-2 ratio measures the cluster, not the models."""
    from compat.results import ResultRecord, Status

    acc = 0
    for i in range(int((entry.config or {}).get("work", 4_000_000))):
        acc = (acc + i * i) % 1_000_003
    return [ResultRecord(architecture=entry.name, rank=entry.rank, device=device, check=c, status=Status.PASS,
                         metrics={"acc": acc}) for c in checks]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_workers(n: int, env: dict[str, str], tmp: Path) -> list[subprocess.Popen]:
    procs = []
    for i in range(n):
        log = (tmp / f"worker{n}-{i}.log").open("w")
        procs.append(subprocess.Popen([str(BIN / "compat"), "worker", "--concurrency", "1", "--hostname",
                                       f"bench{n}-{i}@%h", "--loglevel", "WARNING"], cwd=REPO, env=env,
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return procs


def wait_warm(procs: list[subprocess.Popen], timeout_s: float = 180.0) -> None:
    """Until every worker has its pool process and that process has finished its warm-up (imports torch and
    transformers, resolves the device: seconds of CPU), i.e. its CPU time stops growing. A long-lived cluster
    pays this once per process, not per sweep, so the warm timings leave it out."""
    import psutil

    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        kids = [c for p in procs for c in psutil.Process(p.pid).children()]
        if len(kids) >= len(procs):
            try:
                cpu = sum(sum(c.cpu_times()[:2]) for c in kids)
            except psutil.NoSuchProcess:
                cpu = None
            if cpu is not None and last is not None and cpu - last < 0.05:
                return
            last = cpu
        time.sleep(0.5)
    raise TimeoutError("workers did not finish warming up")


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        p.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--archs", type=int, default=40)
    ap.add_argument("--fake", action="store_true", help="CPU-bound stand-in per architecture (no models)")
    ap.add_argument("--checks", default="load,forward,generate,train")
    ap.add_argument("--repeat", type=int, default=1, help="repeat the whole sequence; the best time per path counts")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-celery-"))
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL)
    knobs = {"COMPAT_BROKER_URL": f"redis://127.0.0.1:{port}/0", "COMPAT_DATABASE_URL": f"sqlite:///{tmp}/c.db",
             "COMPAT_VAR_DIR": str(tmp / "var"), "COMPAT_CATALOG_SOURCE": "registry",
             "COMPAT_RUN_HOOK": "bench_celery:cpu_bound" if args.fake else ""}
    os.environ.update(knobs)
    from compat.results import ArchitectureEntry, Check, Trigger
    from compat.settings import get_settings
    from service.store import Store
    from worker.catalog.load import load_catalog
    from worker.orchestration.celery_app import make_app
    from worker.orchestration.executors import CeleryExecutor
    from worker.orchestration.planning import make_plan
    from worker.orchestration.sweep import InProcessExecutor
    from worker.run.process.devices import resolve_device

    get_settings.cache_clear()
    settings = get_settings()
    store = Store(settings.database_url)
    checks = [Check(c) for c in args.checks.split(",")]
    if args.fake:
        entries = [ArchitectureEntry(name=f"Fake{i}", model_type="fake", rank=i + 1) for i in range(args.archs)]
    else:
        entries = load_catalog("registry", args.archs).entries

    device = resolve_device("neuron")

    def plan():  # noqa: ANN202
        return make_plan(entries, device, checks, trigger=Trigger.MANUAL, database_url=settings.database_url,
                         workdir=tmp / "work")

    cores = os.cpu_count() or 1
    timings: dict[str, float] = {}

    def timed(key: str, fn) -> None:  # noqa: ANN001 - best of the repeats: the least disturbed by other load
        t0 = time.perf_counter()
        fn()
        timings[key] = min(timings.get(key, float("inf")), time.perf_counter() - t0)

    try:
        for _ in range(args.repeat):
            if not args.fake:  # first, so a machine getting quieter does not flatter the Celery path
                timed("in_process_1", lambda: InProcessExecutor(device, jobs=1).run(store, plan()))
            for n in (1, 2):
                # Threads per worker = cores / workers, as the in-process pool sizes them.
                env = dict(os.environ, PYTHONPATH=f"{REPO / 'bench'}{os.pathsep}{REPO}",
                           OMP_NUM_THREADS=str(max(1, cores // n)))
                cold_start = time.perf_counter()
                procs = start_workers(n, env, tmp)
                try:
                    wait_warm(procs)

                    def celery_run() -> None:
                        outcome = CeleryExecutor(make_app(settings)).run(store, plan())
                        assert outcome.state == "complete", outcome.state

                    timed(f"celery_{n}_warm", celery_run)
                    # Cold: from starting the workers, so it pays the same process start and warm-up as the
                    # in-process path (whose pool starts inside its timing).
                    cold = time.perf_counter() - cold_start
                    timings[f"celery_{n}_cold"] = min(timings.get(f"celery_{n}_cold", float("inf")), cold)
                finally:
                    stop(procs)
    finally:
        redis.terminate()
    out = {"repeat": args.repeat, "load_avg_1m_at_end": round(os.getloadavg()[0], 1), "archs": len(entries),
           "checks": [str(c) for c in checks], "fake": args.fake, "cores": cores,
           "seconds": {k: round(v, 1) for k, v in timings.items()},
           "speedup_2_vs_1_workers_warm": round(timings["celery_1_warm"] / timings["celery_2_warm"], 2),
           "speedup_2_vs_1_workers_cold": round(timings["celery_1_cold"] / timings["celery_2_cold"], 2)}
    if "in_process_1" in timings:  # both cold: process start, warm-up and the 40 architectures
        out["celery_vs_in_process_1_worker"] = round(timings["celery_1_cold"] / timings["in_process_1"], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
