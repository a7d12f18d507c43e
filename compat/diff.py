"""The regression rule: how two runs' results differ (regression, fix, missing), and the gate's verdict on a run.

Pure functions of records and run states, shared by the nightly gate, the CLI, the API's ``/diff`` and the pages
(docs/ARCHITECTURE.md, "Read rules"). The run selection (which baseline) is ``service.runs.baseline_run``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from compat.results import FAILURE_STATUSES, ResultRecord, Status
from compat.states import FINISHED_STATES, RunState  # noqa: F401 - FINISHED_STATES re-exported


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
    """How a run differs from its baseline, key by key. ``regressions`` is what fails the nightly gate."""

    baseline_run: str | None
    current_run: str
    regressions: list[Change] = field(default_factory=list)  # passed before, a device failure now
    fixes: list[Change] = field(default_factory=list)  # a device failure before, passes now
    missing: list[Change] = field(default_factory=list)  # passed before, absent or no verdict now
    other: list[Change] = field(default_factory=list)  # any other status change

    @property
    def regressed_architectures(self) -> list[str]:
        return sorted({c.architecture for c in self.regressions})

    @property
    def fixed_architectures(self) -> list[str]:
        """Architectures with a fix and no regression (one with both is listed as regressed)."""
        regressed = set(self.regressed_architectures)
        return sorted({c.architecture for c in self.fixes} - regressed)


def _detail(rec: ResultRecord) -> str:
    if rec.blocking_op:
        return rec.blocking_op
    if rec.error is not None:
        return f"{rec.error.type}: {rec.error.message}"[:200]
    return (rec.reason or "")[:200]


def diff_results(baseline: Iterable[ResultRecord], current: Iterable[ResultRecord], *,
                 baseline_run: str | None = None, current_run: str = "",
                 only: Collection[str] | None = None) -> RunDiff:
    """Compare two runs key by key (architecture, device, check).

    A regression is a key that passed in the baseline and has a failure status now (mismatch, unsupported op or
    dtype, oom, error, crash, timeout): the device was shown to fail it. A pass that became ``skipped``,
    ``reference_fail`` or ``harness_error``, or vanished, is ``missing``: no verdict about the device. A fix is a
    failure status that passes now. ``only`` restricts the comparison to those architectures (a selection run is
    compared over its own selection, never reported as having "removed" the rest of the catalog).
    """
    keep = set(only) if only is not None else None
    before = {r.key: r for r in baseline if keep is None or r.architecture in keep}
    after = {r.key: r for r in current if keep is None or r.architecture in keep}
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
    lines = [f"run {diff.current_run} vs baseline {base}: {len(diff.regressions)} regression(s) in "
             f"{len(diff.regressed_architectures)} architecture(s), {len(diff.fixes)} fix(es), "
             f"{len(diff.missing)} missing, {len(diff.other)} other change(s)"]
    lines += [f"REGRESSION {c.line()}" for c in diff.regressions]
    lines += [f"missing    {c.line()}" for c in diff.missing]
    lines += [f"fixed      {c.line()}" for c in diff.fixes]
    return "\n".join(lines)


@dataclass(frozen=True)
class GateVerdict:
    code: int  # the exit code: 1 = the gate failed
    lines: list[str]
    diff: RunDiff | None = None  # what the verdict judged (the notifications are built on it)


def gate(diff: RunDiff, *, state: str, planned: int, missing: int, fail_on_regression: bool) -> GateVerdict:
    """The nightly gate: a run that did not close ``complete`` (incomplete, interrupted, still running) fails it,
    with the number of planned results it lacks; so does any regression. Without ``fail_on_regression`` it only
    reports (exit 0)."""
    lines = [format_diff(diff)]
    failed = bool(diff.regressions)
    if state != RunState.COMPLETE:
        lines.insert(0, f"run {diff.current_run} is {state}: {missing} of {planned} planned result(s) missing")
        failed = True
    return GateVerdict(int(fail_on_regression and failed), lines, diff)
