"""API latency benchmark: uvicorn serves the app in one process, a second process drives bounded concurrent load.

Prints p50/p99 for coverage, architectures list and diff over a generated 125k-result SQLite DB. Usage:
    .venv/bin/python bench/bench_api.py [--db var/bench.db] [--requests 400] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from latency import load_process, serve, timed_gets

ROOT = Path(__file__).resolve().parent.parent
TARGETS_MS = {"coverage": 50.0, "architectures": 50.0, "architectures_filtered": 50.0, "diff": 200.0,
              "diff_random_pairs": 200.0}


def drive(base: str, requests: int, concurrency: int) -> dict[str, dict[str, float]]:
    """Runs in the load process: per endpoint, ``requests`` GETs with ``concurrency`` in flight."""
    rng = random.Random(0)

    def fixed(path: str) -> Callable[[], str]:
        return lambda: path

    def random_pair() -> str:
        # Random pairs over 100 runs overflow the 64-entry roll-up cache: mostly cold reads.
        a, b = rng.sample(range(100), 2)
        return f"/api/v1/diff?a=run{a:04d}&b=run{b:04d}"

    rows = {
        "coverage": (fixed("/api/v1/coverage?device=neuron"), 200),
        "architectures": (fixed("/api/v1/architectures?device=neuron&per_page=50"), 200),
        "architectures_filtered": (
            fixed("/api/v1/architectures?device=neuron&status=unsupported&check=forward&q=arch1"), 200),
        "diff": (fixed("/api/v1/diff?a=run0098&b=run0099"), 200),
        "diff_random_pairs": (random_pair, 200),
    }
    return timed_gets(base, rows, requests, concurrency)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=ROOT / "var" / "bench.db")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--drive", help=argparse.SUPPRESS)  # internal: run as the load process against this URL
    args = ap.parse_args()
    if args.drive:
        print(json.dumps(drive(args.drive, args.requests, args.concurrency)))
        return 0
    if not args.db.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_db.py"), str(args.db)], check=True, cwd=ROOT)
    with serve(f"sqlite:///{args.db.resolve()}", start_timeout_s=60) as base:
        results = load_process(__file__, base, args.requests, args.concurrency)
    ok = True
    print(f"{'endpoint':<24}{'p50 ms':>10}{'p99 ms':>10}{'target p99':>12}  (n={args.requests}, "
          f"concurrency={args.concurrency}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for name, r in results.items():
        met = r["p99_ms"] <= TARGETS_MS[name]
        ok &= met
        print(f"{name:<24}{r['p50_ms']:>10}{r['p99_ms']:>10}{TARGETS_MS[name]:>12}  {'ok' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
