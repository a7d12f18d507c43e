"""The nightly gate: what ``--baseline`` names, and the gate over a run (its state, then its regressions, each
re-run once by the flake guard before it counts; what moved is named above them).

The regression rule and the gate's verdict are ``compat.diff``; the baseline run is ``service.runs.baseline_run``
(through the store); the re-run is ``flake_guard``'s, handed in as ``rerun``. The schedule (``parse_cron``,
``beat_schedule``) is in ``celery_app``; the nightly's plan is ``planning.nightly_plan``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from compat.diff import GateVerdict, RunDiff, diff_results, gate
from compat.results import ResultRecord, Trigger


class BaselineStore(Protocol):
    def baseline_run_id(self, run_id: str, trigger: str | None = None) -> str | None: ...


@dataclass(frozen=True)
class BaselineSpec:
    """What ``--baseline`` names: the newest earlier run of a trigger (``last-nightly``, ``last``), or a run id."""

    trigger: str | None = None
    run_id: str | None = None


def parse_baseline(spec: str) -> BaselineSpec:
    """``last`` = previous run of any trigger; ``last-<trigger>`` = previous run of that trigger; else a run id."""
    if spec == "last":
        return BaselineSpec()
    if spec.startswith("last-"):
        trigger = spec.removeprefix("last-")
        valid = {t.value for t in Trigger}
        if trigger not in valid:
            raise ValueError(f"unknown baseline {spec!r}: use last, run id, or last-<{'|'.join(sorted(valid))}>")
        return BaselineSpec(trigger=trigger)
    if not spec or not all(c.isalnum() or c in "-_" for c in spec):
        raise ValueError(f"baseline {spec!r} is neither last[-<trigger>] nor a run id")
    return BaselineSpec(run_id=spec)


def find_baseline(store: BaselineStore, spec: BaselineSpec, device: str, current_run_id: str) -> str | None:
    """The run to compare ``current_run_id`` against: never the run itself, always on the same device."""
    if spec.run_id is not None:
        return spec.run_id if spec.run_id != current_run_id else None
    return store.baseline_run_id(current_run_id, trigger=spec.trigger)


class RunStore(BaselineStore, Protocol):
    def run_results(self, run_id: str) -> list[ResultRecord]: ...
    def run_state(self, run_id: str) -> tuple[str, int, int]: ...
    def selection(self, run_id: str) -> list[str] | None: ...
    def determinants(self, run_id: str | None) -> dict[str, str] | None: ...
    def rerun_id(self, run_id: str) -> str | None: ...


# Re-runs a diff's regressed keys in fresh processes and stores them as a run linked to the diff's run
# (``flake_guard.rerun_regressions`` bound to the sweep's entries and device); returns that run's id.
Rerun = Callable[[RunDiff], str | None]


def stored_diff(store: RunStore, run_id: str, baseline_id: str | None) -> RunDiff:
    """The gate's diff of ``run_id`` against ``baseline_id``: the run's flake-guard re-run (if any) decides which
    regressions are flaky, the two runs' determinants what moved."""
    before = store.run_results(baseline_id) if baseline_id else []
    again = store.rerun_id(run_id)
    return diff_results(before, store.run_results(run_id), baseline_run=baseline_id, current_run=run_id,
                        only=store.selection(run_id), rerun=store.run_results(again) if again else None,
                        rerun_run=again, determinants=(store.determinants(baseline_id), store.determinants(run_id)))


def regression_gate(store: RunStore, run_id: str, device: str, baseline: str,
                    fail_on_regression: bool, rerun: Rerun | None = None) -> GateVerdict:
    """``compat sweep --baseline SPEC [--fail-on-regression]``: the diff against the chosen baseline and the gate's
    verdict (exit 1 when gating and the run is not complete, or has a regression its re-run confirmed). ``rerun``:
    the flake guard, called once per run when it has regressions and no re-run yet. No baseline yet (first
    nightly) gates only the run's own state."""
    spec = parse_baseline(baseline)
    baseline_id = find_baseline(store, spec, device, run_id)
    diff = stored_diff(store, run_id, baseline_id)
    note = None
    if diff.regressions and rerun is not None and store.rerun_id(run_id) is None:
        try:
            rerun(diff)
        except Exception as exc:  # noqa: BLE001 - a re-run that cannot run confirms nothing: every regression counts
            note = f"flake guard: the re-run failed ({type(exc).__name__}: {exc}); every regression counts"
        diff = stored_diff(store, run_id, baseline_id)
    state, planned, missing = store.run_state(run_id)
    verdict = gate(diff, state=state, planned=planned, missing=missing, fail_on_regression=fail_on_regression)
    return GateVerdict(verdict.code, [note, *verdict.lines], verdict.diff) if note else verdict
