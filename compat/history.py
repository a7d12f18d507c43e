""""What regressed in the last N days": the regressions of every run in a window, each against its own baseline
(the gate's rule, ``compat.diff.diff_results``), newest first, with a per-architecture summary.

Pure over diffs; ``service.queries.regressions_since`` picks the runs and their baselines (``service.runs``), and
the API (``GET /api/v1/regressions?days=N``) and the page (``/regressions``) show the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from compat.diff import RunDiff


@dataclass(frozen=True)
class RunMoment:
    """A run in the window and its diff against its baseline."""

    run_id: str
    started: datetime
    device: str
    trigger: str
    lane: str
    diff: RunDiff


def regression_history(moments: Iterable[RunMoment]) -> dict[str, Any]:
    """Every regression of ``moments`` (one row per run and key, newest run first) and, per architecture, how many
    regressions it had, in how many runs, and when it last regressed."""
    events: list[dict[str, Any]] = []
    for m in sorted(moments, key=lambda m: (m.started, m.run_id), reverse=True):
        for c in m.diff.regressions:
            events.append({"run_id": m.run_id, "baseline_run": m.diff.baseline_run, "started": m.started,
                           "device": m.device, "trigger": m.trigger, "lane": m.lane, "architecture": c.architecture,
                           "check": c.check, "before": c.before, "after": c.after, "detail": c.detail})
    by_arch: dict[str, dict[str, Any]] = {}
    for e in events:
        a = by_arch.setdefault(e["architecture"], {"architecture": e["architecture"], "regressions": 0,
                                                   "runs": set(), "last": e["started"], "last_run": e["run_id"]})
        a["regressions"] += 1
        a["runs"].add(e["run_id"])
    summary = [{**a, "runs": len(a["runs"])} for a in by_arch.values()]
    summary.sort(key=lambda a: (a["last"], a["regressions"], a["architecture"]), reverse=True)
    return {"events": events, "architectures": summary}
