"""Benchmark: full registry sweep wall time with --jobs 1 vs --jobs 2, seconds per architecture, compile cost.

Runs every sweep in this one invocation so the ratio is measured under the same (noisy, shared) machine load.
Usage: .venv/bin/python bench/bench_sweep.py [--device neuron] [--limit N] [--jobs 1,2] [--compile-sample 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from compat.coverage import coverage
from compat.results import ALL_CHECKS, DEFAULT_CHECKS, Check, Status
from worker.catalog.load import load_catalog
from worker.orchestration.sweep import run_sweep
from worker.run.process.devices import Device, resolve_device


def sweep_once(entries, device: Device, checks, jobs: int) -> dict:  # noqa: ANN001
    t0 = time.perf_counter()
    report = run_sweep(entries, device, checks, jobs=jobs)
    wall = time.perf_counter() - t0
    cov = coverage(report.results)
    per_check = {str(c): statistics.fmean([r.duration_s for r in report.results if r.check == c] or [0.0])
                 for c in checks}
    return {"jobs": jobs, "wall_s": round(wall, 1), "architectures": len(entries),
            "s_per_arch": round(wall / max(1, len(entries)), 2),
            "supported": cov.supported, "all_checks_pass": cov.all_checks_pass(report.results),
            "verdicts": dict(cov.verdicts), "mean_check_s": {k: round(v, 3) for k, v in per_check.items()},
            "reference_fail": sum(1 for r in report.results if r.status == Status.REFERENCE_FAIL)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="neuron")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--compile-sample", type=int, default=5, help="architectures to time the compile check on")
    ap.add_argument("--out", type=Path, default=Path("var/bench/bench_sweep.json"))
    args = ap.parse_args()
    entries = load_catalog("registry", args.limit).entries
    device = resolve_device(args.device)
    results = {"device": args.device, "runs": []}
    for jobs in [int(j) for j in args.jobs.split(",")]:
        run = sweep_once(entries, device, DEFAULT_CHECKS, jobs)
        results["runs"].append(run)
        print(json.dumps(run), flush=True)
    if len(results["runs"]) >= 2:
        a, b = results["runs"][0], results["runs"][-1]
        results["speedup"] = round(a["wall_s"] / b["wall_s"], 2)
        print(f"jobs {b['jobs']} vs {a['jobs']}: {results['speedup']}x", flush=True)
    if args.compile_sample:
        # Compile is opt-in: time it alone, on the first N buildable architectures, with one job.
        sample = [e for e in entries if not e.remote_code][: args.compile_sample]
        t0 = time.perf_counter()
        rep = run_sweep(sample, device, [Check.LOAD, Check.COMPILE], jobs=1)
        wall = time.perf_counter() - t0
        comp = [r for r in rep.results if r.check == Check.COMPILE]
        results["compile"] = {
            "architectures": len(sample), "wall_s": round(wall, 1),
            "compile_check_s": [round(r.duration_s, 1) for r in comp],
            "mean_compile_check_s": round(statistics.fmean([r.duration_s for r in comp] or [0.0]), 1),
            "statuses": [str(r.status) for r in comp], "all_checks": [str(c) for c in ALL_CHECKS],
        }
        print(json.dumps(results["compile"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
