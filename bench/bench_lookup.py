"""Lookup latency: ``GET /api/v1/models/{org}/{name}`` p50/p99 under bounded concurrent load (uvicorn in one
process, the load in another, as bench_api.py), and the wall time of ``compat lookup`` (a fresh process each time).

    .venv/bin/python bench/bench_lookup.py [--db var/lookup-bench.db] [--requests 500] [--concurrency 4]
        [--cli-runs 20] [--cli-only] [--compare] [--inprocess]

Without ``--db`` (or when it does not exist yet) the store is seeded by ``compat sweep --models --device cpu
--jobs 0`` over the whole shipped corpus with the passing stand-in runner (COMPAT_RUN_HOOK=passing_runner:passing,
tests/helpers): the rows, plans and result rows a real sweep stores, without running 60 models. A lookup reads the
same rows either way; pass a store from a real ``compat sweep --models`` to bench that one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from latency import load_process, pct, serve, timed_gets

ROOT = Path(__file__).resolve().parent.parent
TARGET_P99_MS = 50.0  # issue 33
TARGET_CLI_S = 1.0


def seed(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "COMPAT_DATABASE_URL": f"sqlite:///{db.resolve()}", "COMPAT_RUN_HOOK": "passing_runner:passing",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "helpers")]), "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "cli.app", "sweep", "--models", "--device", "cpu", "--jobs", "0"],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def drive(base: str, requests: int, concurrency: int, ids: list[str]) -> dict[str, dict[str, float]]:
    """Runs in the load process: stored models (200) and unknown ones (404), ``requests`` GETs each."""
    rng = random.Random(0)
    rows = {"stored model": (lambda: f"/api/v1/models/{rng.choice(ids)}", 200),
            "unknown model (404)": (lambda: f"/api/v1/models/nobody/m{rng.randrange(10**6)}", 404)}
    return timed_gets(base, rows, requests, concurrency)


def inprocess(url: str, ids: list[str], requests: int) -> None:
    """Each lookup through the app in this process, one at a time: wall and CPU (process_time) per request."""
    from fastapi.testclient import TestClient  # noqa: PLC0415 - only for --inprocess

    from compat.settings import Settings  # noqa: PLC0415
    from service.app import create_app  # noqa: PLC0415

    client = TestClient(create_app(Settings(database_url=url), migrate=False))
    rng = random.Random(1)
    wall, cpu = [], []
    for i in range(requests + 20):
        path = f"/api/v1/models/{rng.choice(ids)}"
        t, c = time.perf_counter(), time.process_time()
        client.get(path).raise_for_status()
        if i >= 20:  # the first 20 warm the app
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
    print(f"in-process, one at a time (n={requests}): wall p50 {pct(wall, 0.5):.1f} ms p99 {pct(wall, 0.99):.1f} "
          f"ms; CPU p50 {pct(cpu, 0.5):.1f} ms p99 {pct(cpu, 0.99):.1f} ms")


# What the installed `compat` script runs (pyproject's [project.scripts]: cli.entry:main), and the entry point before
# issue 33's cut (cli.app:main: the whole Typer tree, rich, every command's imports), for the ratio in one run.
PROGRAMS = {"compat lookup": "import sys; from cli.entry import main; sys.exit(main())",
            "via cli.app (before)": "import sys; from cli.app import main; sys.exit(main())"}


def cli_times(db: Path, model_id: str, n: int, programs: list[str]) -> dict[str, dict[str, list[float]]]:
    """``compat lookup MODEL --json`` in a fresh process, ``n`` times per program, interleaved: per program the wall
    s, the process's CPU s (user + system: less sensitive to a loaded machine) and the load average at each start."""
    env = {**os.environ, "COMPAT_DATABASE_URL": f"sqlite:///{db.resolve()}"}
    out = {p: {"wall": [], "cpu": [], "load": []} for p in programs}
    for _ in range(n):
        for name in programs:
            out[name]["load"].append(os.getloadavg()[0])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", PROGRAMS[name], "lookup", model_id, "--json"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            out[name]["wall"].append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[name]["cpu"].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=ROOT / "var" / "lookup-bench.db")
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--inprocess", action="store_true",
                    help="also time each lookup in this process (ASGI test client, one at a time): wall and CPU ms, "
                         "the CPU figure less sensitive to a loaded machine")
    ap.add_argument("--cli-runs", type=int, default=20, help="fresh `compat lookup` processes to time (>= 20)")
    ap.add_argument("--cli-only", action="store_true", help="time the CLI only, not the API")
    ap.add_argument("--compare", action="store_true", help="also time the lookup through cli.app's whole command "
                    "tree (the entry point before issue 33's cut), interleaved, and print the ratio")
    ap.add_argument("--drive", help=argparse.SUPPRESS)  # internal: the load process, against this URL
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.drive:
        print(json.dumps(drive(args.drive, args.requests, args.concurrency, json.loads(args.ids))))
        return 0
    if not args.db.exists():
        seed(args.db)
    url = f"sqlite:///{args.db.resolve()}"
    sys.path.insert(0, str(ROOT))
    from service.model_queries import list_models  # noqa: PLC0415 - after the path is set
    from service.store import Store  # noqa: PLC0415

    with Store(url).session() as s:
        ids = [row.model_id for row, _ in list_models(s) if "/" in row.model_id]
    results = {}
    if not args.cli_only:
        with serve(url) as base:
            results = load_process(__file__, base, args.requests, args.concurrency, "--ids", json.dumps(ids))
    programs = list(PROGRAMS) if args.compare else ["compat lookup"]
    cli = cli_times(args.db, "meta-llama/Llama-3.1-8B-Instruct", args.cli_runs, programs)
    if args.inprocess:
        inprocess(url, ids, args.requests)
    print(f"{len(ids)} stored models with a Hub id; n={args.requests} per row, concurrency={args.concurrency}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ok = True
    for name, r in results.items():
        met = r["p99_ms"] <= TARGET_P99_MS
        ok &= met
        print(f"GET /api/v1/models/ORG/NAME, {name:<20} p50 {r['p50_ms']:>6} ms  p99 {r['p99_ms']:>6} ms  "
              f"(target p99 {TARGET_P99_MS} ms: {'ok' if met else 'MISSED'})")
    for name, m in cli.items():
        walls, cpus, loads = m["wall"], m["cpu"], m["load"]
        med = statistics.median(walls)
        if name == "compat lookup":
            ok &= med < TARGET_CLI_S
        print(f"{name} (fresh process, {len(walls)} runs): wall median {med:.3f} s, p90 {pct(walls, 0.9):.3f} s, "
              f"min {min(walls):.3f} s; CPU median {statistics.median(cpus):.3f} s, p90 {pct(cpus, 0.9):.3f} s; "
              f"load average {min(loads):.1f}-{max(loads):.1f}"
              + (f" (target {TARGET_CLI_S} s wall: {'ok' if med < TARGET_CLI_S else 'MISSED'})"
                 if name == "compat lookup" else ""))
    if len(cli) == 2:
        (new, old) = (cli[p] for p in PROGRAMS)
        print("median ratio compat lookup / via cli.app: wall "
              f"{statistics.median(new['wall']) / statistics.median(old['wall']):.2f}, CPU "
              f"{statistics.median(new['cpu']) / statistics.median(old['cpu']):.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
