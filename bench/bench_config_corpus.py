"""The CPU self-check (load, forward, generate, train) of every native causal-LM config of the real corpus
(worker/catalog/corpus), plus the synthetic NaN/Infinity one: per config its verdict and time, then the totals.

    .venv/bin/python bench/bench_config_corpus.py [--only name.json ...]

In-process, one config after another (``run_architecture`` on the ``cpu`` device, the same call the slow test
``tests/worker/build/test_config_corpus.py::test_every_native_config_passes_the_cpu_self_check`` makes). Exit code 1
if any native config does not pass every check.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import transformers  # noqa: E402 - after the path is set

from compat.native import causal_lm_problem, registry_of, remote_code_verdict  # noqa: E402
from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Status  # noqa: E402
from worker.run.process.devices import resolve_device  # noqa: E402
from worker.run.runner.runner import run_architecture  # noqa: E402

CORPUS = ROOT / "worker" / "catalog" / "corpus"
SYNTHETIC = ROOT / "tests" / "data" / "synthetic_configs" / "nemotron_h_nonfinite.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="config file names to run (default: all native causal LMs)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    registry = registry_of(transformers)
    rows = json.loads((CORPUS / "index.json").read_text())["files"]
    paths = [CORPUS / r["file"] for r in rows] + [SYNTHETIC]
    device = resolve_device("cpu")
    load_before = os.getloadavg()
    results: list[tuple[str, float, list[str]]] = []
    started = time.perf_counter()
    for path in paths:
        if args.only and path.name not in args.only:
            continue
        cfg = json.loads(path.read_text())
        if remote_code_verdict(cfg, registry).remote_code or causal_lm_problem(cfg, registry):
            continue
        entry = ArchitectureEntry(name=cfg["architectures"][0], model_type=cfg["model_type"], rank=1, config=cfg)
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # the runner's phase lines; the verdicts are printed below
            recs = run_architecture(entry, device, DEFAULT_CHECKS)
        took = time.perf_counter() - t0
        bad = [f"{r.check}:{r.status}" + (f" ({(r.reason or '')[:80]})" if r.reason else "")
               for r in recs if r.status != Status.PASS]
        results.append((path.name, took, bad))
        print(f"{path.name:45s} {took:6.1f} s  {'pass' if not bad else '; '.join(bad)}", file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    times = sorted(t for _, t, _ in results)
    failing = [(n, b) for n, _, b in results if b]
    print(f"\nconfigs: {len(results)}  all checks pass: {len(results) - len(failing)}  "
          f"total {total:.0f} s  median {times[len(times) // 2]:.1f} s  max {times[-1]:.1f} s "
          f"({max(results, key=lambda r: r[1])[0]})")
    print(f"load average before: {load_before[0]:.1f}  after: {os.getloadavg()[0]:.1f}  cores: {os.cpu_count()}")
    for name, bad in failing:
        print(f"FAIL {name}: {'; '.join(bad)}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
