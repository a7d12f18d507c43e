"""Fill a SQLite results DB for the API benchmark: 100 runs x 250 architectures x 5 checks = 125k results.

Deterministic (seeded); goes through the real ``Store`` so ingest is exercised too. Usage:
    .venv/bin/python bench/gen_db.py var/bench.db [--runs 100 --archs 250]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from compat.results import (
    ALL_CHECKS,
    ArchitectureEntry,
    DeviceInfo,
    ErrorInfo,
    ResultRecord,
    RunInfo,
    Status,
    Trigger,
)
from service.store import Store

OPS = ["aten::histc (Long)", "aten::_fft_r2c (Float)", "aten::linalg_eigh (Float)", "aten::sort (BFloat16)",
       "aten::bucketize (Long)", "aten::cumprod (Half)", "aten::nonzero (Bool)", "aten::searchsorted (Float)"]
FAILS = [Status.UNSUPPORTED_OP, Status.MISMATCH, Status.ERROR, Status.UNSUPPORTED_DTYPE, Status.TIMEOUT]


def generate(path: Path, runs: int, archs: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    url = f"sqlite:///{path}"
    store = Store(url)
    entries = [ArchitectureEntry(name=f"Arch{i:03d}ForCausalLM", model_type=f"arch{i:03d}", rank=i + 1,
                                 downloads=10**7 // (i + 1), representative=f"org{i}/model-{i}") for i in range(archs)]
    # Each architecture starts broken with some probability; runs fix or break a few at a time.
    broken = {e.name: (rng.choice(FAILS), rng.choice(OPS)) for e in entries if rng.random() < 0.45}
    start = datetime(2026, 1, 1, tzinfo=UTC)
    run_id = ""
    for k in range(runs):
        for e in rng.sample(entries, 4):
            if e.name in broken:
                del broken[e.name]
            else:
                broken[e.name] = (rng.choice(FAILS), rng.choice(OPS))
        run = RunInfo(id=f"run{k:04d}", trigger=Trigger.NIGHTLY if k % 2 else Trigger.MANUAL,
                      device=DeviceInfo(name="neuron", simulated=True, torch_version="2.13.0"),
                      checks=list(ALL_CHECKS), started=start + timedelta(hours=k))
        planned = [(e.name, "neuron", str(c)) for e in entries for c in ALL_CHECKS]
        store.start_run(run, entries, planned)
        records = []
        for e in entries:
            fail = broken.get(e.name)
            for i, c in enumerate(ALL_CHECKS):
                status = fail[0] if fail and i >= 1 else Status.PASS
                records.append(ResultRecord(
                    architecture=e.name, rank=e.rank, device="neuron", check=c, status=status,
                    metrics={"max_abs": rng.random() * 1e-3}, duration_s=rng.random() * 3,
                    blocking_op=fail[1] if status == Status.UNSUPPORTED_OP else None,
                    error=ErrorInfo(type="RuntimeError", message=f"{c} failed on neuron") if status != Status.PASS
                    else None, repro=f"compat repro {e.name} --device neuron --check {c}"))
        store.add_results(run.id, records)
        store.finish_run(run.id)
        run_id = run.id
    return run_id


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--archs", type=int, default=250)
    args = ap.parse_args()
    if args.path.exists():
        print(f"{args.path} exists; remove it first", file=sys.stderr)
        return 1
    args.path.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    generate(args.path, args.runs, args.archs)
    n = args.runs * args.archs * len(ALL_CHECKS)
    print(f"wrote {n} results in {time.perf_counter() - t:.1f} s to {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
