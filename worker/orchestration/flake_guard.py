"""The flake guard: before a regression counts, each regressed (architecture, check) runs once more in a fresh
process; the re-run is a run of its own (``rerun_of`` = the run it re-ran), so both are kept and linked.

``compat.diff.diff_results`` then reads a regression whose re-run passed as ``flaky`` (shown, counted, never gated
on); the gate fails only on the ones the re-run confirmed (issue 34 item 1).
"""

from __future__ import annotations

import logging
from typing import Any

from compat.checks import RUN_ORDER, USES_LOADED_MODEL
from compat.diff import RunDiff
from compat.results import ArchitectureEntry, Check, RunInfo, Scope, Trigger
from worker.orchestration.sweep import ResultSink, run_isolated
from worker.run.process.determinants import run_determinants
from worker.run.process.devices import Device, device_versions

log = logging.getLogger(__name__)


def rerun_work(diff: RunDiff) -> dict[str, list[Check]]:
    """architecture -> the checks to run again: its regressed ones, with ``load`` before any that runs on the loaded
    model (forward, generate, compile, train need it), in run order."""
    wanted: dict[str, set[Check]] = {}
    for change in diff.regressions:
        checks = wanted.setdefault(change.architecture, set())
        checks.add(Check(change.check))
        if Check(change.check) in USES_LOADED_MODEL:
            checks.add(Check.LOAD)
    return {arch: [c for c in RUN_ORDER if c in checks] for arch, checks in wanted.items()}


def rerun_info(device: Device, diff: RunDiff, trigger: Trigger | str, checks: list[Check],
               catalog_source: str = "registry", snapshot_id: str | None = None) -> RunInfo:
    """The re-run's own record: the same device, trigger and determinants as a sweep now, a selection, linked."""
    return RunInfo(trigger=Trigger(trigger), device=device.info, versions=device_versions(device),
                   catalog_source=catalog_source, snapshot_id=snapshot_id, scope=Scope.SELECTION, checks=checks,
                   determinants=run_determinants(device), rerun_of=diff.current_run)


def rerun_regressions(store: ResultSink, diff: RunDiff, entries: list[ArchitectureEntry], device: Device, *,
                      trigger: Trigger | str, catalog_source: str = "registry", snapshot_id: str | None = None,
                      progress: Any = None) -> str | None:
    """Re-run ``diff``'s regressed keys, each architecture in a fresh process (``sweep.run_isolated``), as one run
    linked to ``diff.current_run``; returns its id (None: nothing regressed, or no catalog entry to re-run)."""
    by_name = {e.name: e for e in entries}
    work = [(by_name[a], checks) for a, checks in rerun_work(diff).items() if a in by_name]
    if not work:
        return None
    checks = [c for c in RUN_ORDER if any(c in cs for _e, cs in work)]
    run = rerun_info(device, diff, trigger, checks, catalog_source, snapshot_id)
    log.info("flake guard: re-running %d regressed key(s) of run %s in fresh processes",
             len(diff.regressions), diff.current_run)
    report = run_isolated(work, device, run, store, progress=progress)
    return report.run.id
