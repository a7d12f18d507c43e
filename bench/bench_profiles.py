"""Summarise whole-registry sweep reports per device profile: out of the box / native / failing, the top blockers
and the top CPU-fallback ops, with the same rules the CLI, API and pages use (compat.results).

    .venv/bin/compat sweep --jobs 1 --json /tmp/trn2.json                       # and --strict, NEURON_PROFILE=...
    .venv/bin/python bench/bench_profiles.py /tmp/trn2.json /tmp/trn2-strict.json ... [--top 10]

Prints one Markdown table row per report, then each report's top blockers and fallback ops.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compat.chains import Chain, blocker_report  # noqa: E402
from compat.coverage import coverage, fallback_ranking  # noqa: E402
from compat.results import ResultRecord, percent  # noqa: E402


def _label(run: dict) -> str:
    details = run["device"].get("details") or {}
    name = run["device"]["name"]
    if name != "neuron":
        return name
    return f"{details.get('profile', '?')}{' --strict' if details.get('strict') else ''}"


def summarise(path: Path, top: int) -> tuple[str, list[str]]:
    """(table row, detail lines) of one sweep report."""
    report = json.loads(path.read_text())
    run = report["run"]
    records = [ResultRecord.model_validate(r) for r in report["results"]]
    cov = coverage(records, [a["name"] for a in report["architectures"]])
    wall = "?"
    if run.get("started") and run.get("finished"):
        wall = f"{(datetime.fromisoformat(run['finished']) - datetime.fromisoformat(run['started'])).total_seconds():.0f} s"
    n = cov.architectures
    row = (f"| {_label(run)} | {cov.supported} / {n} ({percent(cov.supported, n)}) | {cov.native} / {n} "
           f"({percent(cov.native, n)}) | {cov.failing} | {cov.verdicts['reference_fail']} | "
           f"{cov.verdicts['not_judged']} | {wall} |")
    lines = [f"{_label(run)} ({path.name}): top blockers"]
    ranked = blocker_report(records, [Chain(**c) for c in report.get("chains", [])])
    lines += [f"  {b.op}: blocks {len(b.architectures)}, unlocks "
              f"{'? (first blockers only)' if b.unlocks is None else len(b.unlocks)} ({', '.join(b.variants)})"
              for b in ranked.blockers[:top]]
    lines += [f"  {u.message}" for u in ranked.unlock_sets[:top]]
    lines.append(f"{_label(run)}: top CPU-fallback ops")
    lines += [f"  {f.op}: falls back in {len(f.architectures)}, alone in {len(f.offloads)}"
              for f in fallback_ranking(records)[:top]]
    return row, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)
    rows, details = [], []
    for path in args.reports:
        row, lines = summarise(path, args.top)
        rows.append(row)
        details += lines
    print("| profile | out of the box | native | failing | reference_fail | not judged | wall (jobs 1) |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("\n".join(details))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
