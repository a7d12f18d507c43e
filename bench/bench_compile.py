"""The compile check's cost in a sweep (issue 20 item 4): wall time with and without it, its records' own time, with
the neuron backend's AOTAutograd cache off, cold and warm, in one session so the ratios share the machine's load.

    .venv/bin/python bench/bench_compile.py                       # 5 dense architectures, --jobs 1
    .venv/bin/python bench/bench_compile.py --registry --jobs 2   # the whole registry
    .venv/bin/python bench/bench_compile.py --in-process --rounds 3  # the check alone, CPU seconds, one process

Each sweep runs ``compat sweep --device neuron --no-store`` with a private store and compile cache under ``--dir``;
"off" sets TORCHINDUCTOR_AUTOGRAD_CACHE=0 (the backend's uncached path), "cold" starts from an empty cache folder,
"warm" reuses what "cold" stored. Verdicts (status, metrics, fallback ops) must match across the compile runs.
``--in-process`` times the compile check alone (process CPU seconds, less sensitive to a shared box than wall time)
in one process, the three modes interleaved per round, after one throw-away compile (the process's one-off cost).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

DENSE = ("LlamaForCausalLM", "GPT2LMHeadModel", "Qwen2ForCausalLM", "MistralForCausalLM", "PhiForCausalLM")
DEFAULT = "load,forward,generate,train"
ROOT = Path(__file__).resolve().parent.parent


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def sweep(tag: str, checks: str, args: argparse.Namespace, env_extra: dict[str, str]) -> dict:
    out = args.dir / f"{tag}.json"
    env = {**os.environ, "COMPAT_DATABASE_URL": f"sqlite:///{args.dir}/{tag}.db", "COMPAT_VAR_DIR": str(args.dir / tag),
           "TORCHINDUCTOR_CACHE_DIR": str(args.dir / "torch-cache"), **env_extra}
    cmd = [str(ROOT / ".venv/bin/compat"), "sweep", "--device", "neuron", "--checks", checks, "--jobs", str(args.jobs),
           "--no-store", "--no-decisions", "--json", str(out)]
    if not args.registry:
        for arch in DENSE:
            cmd += ["--arch", arch]
    before = load()
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    report = json.loads(out.read_text())
    compile_s = [r["duration_s"] for r in report["results"] if r["check"] == "compile" and r.get("duration_s")]
    n = len({r["architecture"] for r in report["results"]})
    row = {"tag": tag, "wall_s": wall, "architectures": n, "load": f"{before} -> {load()}",
           "compile_mean_s": statistics.mean(compile_s) if compile_s else None,
           "compile_median_s": statistics.median(compile_s) if compile_s else None,
           "compile_total_s": sum(compile_s), "verdicts": verdicts(report)}
    print(f"{tag:12s} wall {wall:7.1f} s  archs {n}  compile records: mean {row['compile_mean_s'] or 0:.2f} s "
          f"median {row['compile_median_s'] or 0:.2f} s total {row['compile_total_s']:.1f} s  load {row['load']}",
          flush=True)
    return row


def verdicts(report: dict) -> dict[str, list]:
    """What must not move: each compile record's status, metrics and fallback ops (timings and memory excluded)."""
    return {r["architecture"]: [r["status"], {k: v for k, v in (r.get("metrics") or {}).items()
                                              if k != "reference_cache"}, r.get("fallback_ops"), r.get("blocking_op")]
            for r in report["results"] if r["check"] == "compile"}


def in_process(args: argparse.Namespace) -> None:
    """Median CPU seconds of the compile check per architecture: cache off, cold (a fresh folder), warm."""
    import torch  # noqa: PLC0415 - only this mode needs the harness in the bench's own process

    from compat.results import Check  # noqa: PLC0415
    from worker.build.build import build_checkpoint  # noqa: PLC0415
    from worker.catalog.catalog import registry_entries  # noqa: PLC0415
    from worker.run.checks.checks import CheckContext, run_check  # noqa: PLC0415
    from worker.run.reference.reference import prepare_reference  # noqa: PLC0415
    from worker.run.runner.runner import warm_worker  # noqa: PLC0415

    warm_worker(1, "neuron")
    from worker.run.process.devices import process_device  # noqa: PLC0415

    device = process_device("neuron")
    entries = {e.name: e for e in registry_entries()}
    contexts = []
    for name in DENSE:
        ref = prepare_reference(build_checkpoint(entries[name], args.dir / "ckpt" / name, seed=0).path,
                                device.policy, 0, cache=None)
        ctx = CheckContext(name, 0, device, ref, checks=(Check.LOAD, Check.COMPILE))
        run_check(ctx, Check.LOAD)
        contexts.append(ctx)
    t0 = time.process_time()
    run_check(contexts[0], Check.COMPILE)  # the process's first compile (lazy imports, first-time code analysis)
    print(f"first compile in the process ({DENSE[0]}, cache off... cold): {time.process_time() - t0:.2f} s CPU")
    times: dict[str, dict[str, list[float]]] = {m: {n: [] for n in DENSE} for m in ("off", "cold", "warm")}
    for rnd in range(args.rounds):
        for mode in ("off", "cold", "warm"):
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(args.dir / f"torch-cache-{rnd}")
            torch._functorch.config.enable_autograd_cache = mode != "off"
            for ctx in contexts:
                t0 = time.process_time()
                rec = run_check(ctx, Check.COMPILE)
                times[mode][ctx.architecture].append(time.process_time() - t0)
                assert rec.status == "pass", rec
        print(f"round {rnd + 1}: load {load()}", flush=True)
    for mode, per_arch in times.items():
        medians = {n: statistics.median(v) for n, v in per_arch.items()}
        print(f"{mode:5s} median CPU s per check: " + "  ".join(f"{n.removesuffix('ForCausalLM')} {v:.2f}"
                                                                for n, v in medians.items())
              + f"  | mean {statistics.mean(medians.values()):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--registry", action="store_true", help="the whole registry instead of the 5 dense architectures")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/bench_compile"))
    ap.add_argument("--runs", default="default,off,cold,warm", help="which sweeps, in order (cold empties the cache)")
    ap.add_argument("--in-process", action="store_true", help="time the check alone in this process (CPU seconds)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    if args.in_process:
        in_process(args)
        return
    env = {"default": {}, "off": {"TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}, "cold": {}, "warm": {}}
    rows = []
    for tag in args.runs.split(","):
        if tag == "cold":
            shutil.rmtree(args.dir / "torch-cache", ignore_errors=True)
        rows.append(sweep(tag, DEFAULT if tag == "default" else DEFAULT + ",compile", args, env[tag]))
    base = next((r for r in rows if r["tag"] == "default"), None)
    for row in rows:
        if base is not None and row is not base:
            per_arch = (row["wall_s"] - base["wall_s"]) / max(1, row["architectures"])
            print(f"{row['tag']:12s} compile adds {row['wall_s'] - base['wall_s']:6.1f} s of wall, {per_arch:.2f} s "
                  f"per architecture")
    compiled = [r["verdicts"] for r in rows if r["tag"] != "default"]
    same = all(v == compiled[0] for v in compiled)
    print(f"compile verdicts identical across {'/'.join(r['tag'] for r in rows if r['tag'] != 'default')}: {same} "
          f"({len(compiled[0]) if compiled else 0} architectures)")
    (args.dir / "bench_compile.json").write_text(json.dumps(rows, indent=1, default=str))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
