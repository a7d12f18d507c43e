"""Summarise a fine-tuning sweep's JSON report (``compat sweep --checks lora,sft,fsdp,tp --json FILE``): per check,
the pass rate over buildable architectures, every non-pass with its reason, and the cost per architecture.

"Buildable": the tiny model was built (its records are not ``skipped: not built`` / remote code, not a build
``harness_error``, not a build ``reference_fail`` for a missing optional package).
Usage: .venv/bin/python bench/bench_finetune.py REPORT.json [--only-failures]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path

CHECKS = ("lora", "sft", "fsdp", "tp")  # first, in this order; any other check in the report follows
NOT_BUILT = ("not built", "remote code", "tiny model build failed", "refused before allocation")


def summarise(report: dict) -> dict:
    by_arch: dict[str, dict[str, dict]] = {}
    for r in report["results"]:
        by_arch.setdefault(r["architecture"], {})[r["check"]] = r
    buildable = {a: recs for a, recs in by_arch.items()
                 if not any((r.get("reason") or "").startswith(NOT_BUILT) for r in recs.values())}
    run = report.get("run") or {}
    out: dict = {"architectures": len(by_arch), "buildable": len(buildable), "checks": {},
                 "run": {k: run.get(k) for k in ("started_at", "finished_at", "device", "status") if k in run}}
    present = list(dict.fromkeys(r["check"] for r in report["results"]))
    for check in [c for c in CHECKS if c in present] + [c for c in present if c not in CHECKS]:
        recs = [recs[check] for recs in buildable.values() if check in recs]
        if not recs:
            continue
        statuses = Counter(r["status"] for r in recs)
        secs = sorted(r["duration_s"] for r in recs if r["status"] not in ("skipped",))
        out["checks"][check] = {
            "records": len(recs), "statuses": dict(statuses),
            "pass_rate_buildable": round(statuses["pass"] / len(recs), 3),
            # native: passed with no op run on the CPU by fallback (the device's own kernels only)
            "native_pass": sum(1 for r in recs if r["status"] == "pass" and not r.get("fallback_ops")),
            "top_fallback_ops": Counter(op for r in recs if r["status"] == "pass"
                                        for op in r.get("fallback_ops") or []).most_common(5),
            "seconds_mean": round(statistics.fmean(secs), 2) if secs else None,
            "seconds_median": round(statistics.median(secs), 2) if secs else None,
            "seconds_p90": round(secs[int(0.9 * (len(secs) - 1))], 2) if secs else None,
            "seconds_total": round(sum(secs), 1),
            "not_pass": sorted(f"{r['architecture']}: {r['status']}: "
                               f"{(r.get('reason') or (r.get('error') or {}).get('message') or '')[:160]}"
                               .replace("\n", " ") for r in recs if r["status"] != "pass"),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("report", type=Path)
    parser.add_argument("--only-failures", action="store_true")
    args = parser.parse_args()
    summary = summarise(json.loads(args.report.read_text()))
    if args.only_failures:
        for check, s in summary["checks"].items():
            print(f"== {check}")
            print("\n".join(s["not_pass"]))
        return
    for s in summary["checks"].values():
        s.pop("not_pass")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
