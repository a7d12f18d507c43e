"""The nightly gate's rules: how a baseline run is chosen, and the regression diff of two runs.

Pure functions of their arguments, except ``find_baseline`` and ``regression_gate`` (store reads). The schedule
(``parse_cron``, ``beat_schedule``) is in ``celery_app``; the nightly's plan is ``planning.nightly_plan``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from compat.results import FAILURE_STATUSES, ResultRecord, Status, Trigger


class BaselineStore(Protocol):
    def last_run_id(self, device: str, trigger: str | None = None, before: str | None = None) -> str | None: ...


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
    return store.last_run_id(device, trigger=spec.trigger, before=current_run_id)


@dataclass(frozen=True)
class Change:
    architecture: str
    device: str
    check: str
    before: str | None  # status in the baseline (None: not in it)
    after: str | None  # status now (None: not in this run)
    detail: str = ""  # blocking op, error or reason of the current result

    def line(self) -> str:
        tail = f"  ({self.detail})" if self.detail else ""
        return f"{self.architecture} [{self.device}] {self.check}: {self.before or '-'} -> {self.after or '-'}{tail}"


@dataclass
class RunDiff:
    """How a run differs from its baseline. ``regressions`` is what fails the nightly gate."""

    baseline_run: str | None
    current_run: str
    regressions: list[Change] = field(default_factory=list)  # passed before, fails now
    fixes: list[Change] = field(default_factory=list)  # failed before, passes now
    missing: list[Change] = field(default_factory=list)  # passed before, absent or not judged now
    other: list[Change] = field(default_factory=list)  # any other status change

    def as_dict(self) -> dict[str, Any]:
        def rows(changes: list[Change]) -> list[dict[str, Any]]:
            return [c.__dict__.copy() for c in changes]

        return {"baseline_run": self.baseline_run, "current_run": self.current_run,
                "regressions": rows(self.regressions), "fixes": rows(self.fixes),
                "missing": rows(self.missing), "other": rows(self.other)}


def _detail(rec: ResultRecord) -> str:
    if rec.blocking_op:
        return rec.blocking_op
    if rec.error is not None:
        return f"{rec.error.type}: {rec.error.message}"[:200]
    return (rec.reason or "")[:200]


def diff_results(baseline: Iterable[ResultRecord], current: Iterable[ResultRecord], *,
                 baseline_run: str | None = None, current_run: str = "") -> RunDiff:
    """Compare two runs key by key (architecture, device, check).

    A regression is a key that passed in the baseline and has a failure status now (mismatch, unsupported op or
    dtype, oom, error, crash, timeout). A pass that became ``skipped``, ``reference_fail`` or ``harness_error``
    or vanished is reported as ``missing``, not as a regression: the device was not shown to fail it (a harness
    error is the harness's own fault, blamed on neither device nor CPU; see compat/results.py).
    """
    before = {r.key: r for r in baseline}
    after = {r.key: r for r in current}
    diff = RunDiff(baseline_run=baseline_run, current_run=current_run)
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        old_status = Status(old.status) if old else None
        new_status = Status(new.status) if new else None
        if old_status == new_status:
            continue
        change = Change(*key, before=old_status.value if old_status else None,
                        after=new_status.value if new_status else None, detail=_detail(new) if new else "")
        if old_status == Status.PASS and new_status in FAILURE_STATUSES:
            diff.regressions.append(change)
        elif old_status == Status.PASS:
            diff.missing.append(change)
        elif new_status == Status.PASS and old_status in FAILURE_STATUSES:
            diff.fixes.append(change)
        else:
            diff.other.append(change)
    return diff


def format_diff(diff: RunDiff) -> str:
    """Plain text for a terminal or a CI log: every regression on its own line, then counts of the rest."""
    base = diff.baseline_run or "(none)"
    lines = [f"run {diff.current_run} vs baseline {base}: {len(diff.regressions)} regression(s), "
             f"{len(diff.fixes)} fix(es), {len(diff.missing)} missing, {len(diff.other)} other change(s)"]
    lines += [f"REGRESSION {c.line()}" for c in diff.regressions]
    lines += [f"missing    {c.line()}" for c in diff.missing]
    lines += [f"fixed      {c.line()}" for c in diff.fixes]
    return "\n".join(lines)


class RunStore(BaselineStore, Protocol):
    def run_results(self, run_id: str) -> list[ResultRecord]: ...


def regression_gate(store: RunStore, run_id: str, device: str, baseline: str,
                    fail_on_regression: bool) -> tuple[RunDiff, int]:
    """``compat sweep --baseline SPEC [--fail-on-regression]``: the diff against the chosen baseline and the exit
    code (1 when gating and any regression, else 0). No baseline yet (first nightly) gates nothing."""
    spec = parse_baseline(baseline)
    baseline_id = find_baseline(store, spec, device, run_id)
    before = store.run_results(baseline_id) if baseline_id else []
    diff = diff_results(before, store.run_results(run_id), baseline_run=baseline_id, current_run=run_id)
    return diff, int(fail_on_regression and bool(diff.regressions))
