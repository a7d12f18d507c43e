"""The regression rule: how two runs' results differ (regression, flaky, fix, missing), what moved between them, and
the gate's verdict on a run.

Pure functions of records and run states, shared by the nightly gate, the CLI, the API's ``/diff`` and the pages
(docs/ARCHITECTURE.md, "Read rules"). The run selection (which baseline) is ``service.runs.baseline_run``. A
``RunDiff`` is a plain structure (``as_dict``) that a notifier can send as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compat.moved import Moved, what_moved
from compat.results import FAILURE_STATUSES, ResultRecord, Status
from compat.signatures import Failure, Signature, group
from compat.states import FINISHED_STATES, RunState  # noqa: F401 - FINISHED_STATES re-exported


@dataclass(frozen=True)
class Change:
    architecture: str
    device: str
    check: str
    before: str | None  # status in the baseline (None: not in it)
    after: str | None  # status now (None: not in this run)
    detail: str = ""  # blocking op, error or reason of the current result
    # The flake guard's re-run of this key in a fresh process (``rerun_of`` links the two runs): its status, None
    # when it was not re-run. A regression whose re-run passed is ``flaky``; one whose re-run failed is confirmed.
    rerun: str | None = None

    def line(self) -> str:
        tail = f"  ({self.detail})" if self.detail else ""
        again = f"  [re-run: {self.rerun}]" if self.rerun else ""
        return (f"{self.architecture} [{self.device}] {self.check}: {self.before or '-'} -> {self.after or '-'}"
                f"{tail}{again}")


@dataclass
class RunDiff:
    """How a run differs from its baseline, key by key. ``regressions`` is what fails the nightly gate."""

    baseline_run: str | None
    current_run: str
    regressions: list[Change] = field(default_factory=list)  # passed before, a device failure now
    fixes: list[Change] = field(default_factory=list)  # a device failure before, passes now
    missing: list[Change] = field(default_factory=list)  # passed before, absent or no verdict now
    other: list[Change] = field(default_factory=list)  # any other status change
    # A regression whose re-run in a fresh process passed (issue 34 item 1): shown and counted, never gated on.
    flaky: list[Change] = field(default_factory=list)
    rerun_run: str | None = None  # the flake guard's run of the regressed keys (None: nothing was re-run)
    moved: list[Moved] = field(default_factory=list)  # what determines results and differs (compat.moved)
    signatures: list[Signature] = field(default_factory=list)  # the new failures, grouped (compat.signatures)

    @property
    def regressed_architectures(self) -> list[str]:
        return sorted({c.architecture for c in self.regressions})

    @property
    def fixed_architectures(self) -> list[str]:
        """Architectures with a fix and no regression (one with both is listed as regressed)."""
        regressed = set(self.regressed_architectures)
        return sorted({c.architecture for c in self.fixes} - regressed)

    def as_dict(self) -> dict[str, Any]:
        def rows(changes: list[Change]) -> list[dict[str, Any]]:
            return [c.__dict__.copy() for c in changes]

        return {"baseline_run": self.baseline_run, "current_run": self.current_run,
                "regressions": rows(self.regressions), "fixes": rows(self.fixes),
                "missing": rows(self.missing), "other": rows(self.other),
                "regressed_architectures": self.regressed_architectures,
                "flaky": rows(self.flaky), "rerun_run": self.rerun_run,
                "moved": [m.as_dict() for m in self.moved],
                "signatures": [sig.as_dict() for sig in self.signatures]}


def _detail(rec: ResultRecord) -> str:
    if rec.blocking_op:
        return rec.blocking_op
    if rec.error is not None:
        return f"{rec.error.type}: {rec.error.message}"[:200]
    return (rec.reason or "")[:200]


def _failure(rec: ResultRecord) -> Failure:
    message = rec.error.message if rec.error is not None else rec.reason
    if rec.error is not None and rec.error.type and not (message or "").startswith(rec.error.type):
        message = f"{rec.error.type}: {message}"
    return Failure(rec.architecture, str(rec.check), str(rec.status), rec.blocking_op, message)


def diff_results(baseline: Iterable[ResultRecord], current: Iterable[ResultRecord], *,
                 baseline_run: str | None = None, current_run: str = "",
                 only: Collection[str] | None = None, rerun: Iterable[ResultRecord] | None = None,
                 rerun_run: str | None = None, determinants: tuple[Mapping[str, str] | None,
                                                                  Mapping[str, str] | None] | None = None) -> RunDiff:
    """Compare two runs key by key (architecture, device, check).

    A regression is a key that passed in the baseline and has a failure status now (mismatch, unsupported op or
    dtype, oom, error, crash, timeout): the device was shown to fail it. A pass that became ``skipped``,
    ``reference_fail`` or ``harness_error``, or vanished, is ``missing``: no verdict about the device. A fix is a
    failure status that passes now. ``only`` restricts the comparison to those architectures (a selection run is
    compared over its own selection, never reported as having "removed" the rest of the catalog).

    ``rerun``: the flake guard's records of the regressed keys, run again in a fresh process (run ``rerun_run``);
    a regression whose re-run passed is ``flaky``, not a regression. ``determinants``: (baseline's, run's), what
    each recorded as deciding its results; what differs is ``moved``. The new failures (a failure status now, not
    the same status before; flaky ones left out) are grouped into ``signatures``.
    """
    keep = set(only) if only is not None else None
    before = {r.key: r for r in baseline if keep is None or r.architecture in keep}
    after = {r.key: r for r in current if keep is None or r.architecture in keep}
    again = {r.key: r for r in rerun or ()}
    diff = RunDiff(baseline_run=baseline_run, current_run=current_run, rerun_run=rerun_run if again else None)
    if determinants is not None:
        diff.moved = what_moved(*determinants)
    new_failures: list[Failure] = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        old_status = Status(old.status) if old else None
        new_status = Status(new.status) if new else None
        if old_status == new_status:
            continue
        regressed = old_status == Status.PASS and new_status in FAILURE_STATUSES
        retry = again.get(key) if regressed else None
        change = Change(*key, before=old_status.value if old_status else None,
                        after=new_status.value if new_status else None, detail=_detail(new) if new else "",
                        rerun=str(retry.status) if retry is not None else None)
        if retry is not None and Status(retry.status) == Status.PASS:
            diff.flaky.append(change)
            continue
        if new is not None and new_status in FAILURE_STATUSES:
            new_failures.append(_failure(new))
        if regressed:
            diff.regressions.append(change)
        elif old_status == Status.PASS:
            diff.missing.append(change)
        elif new_status == Status.PASS and old_status in FAILURE_STATUSES:
            diff.fixes.append(change)
        else:
            diff.other.append(change)
    diff.signatures = group(new_failures)
    return diff


def format_diff(diff: RunDiff) -> str:
    """Plain text for a terminal or a CI log: what moved between the two runs, then every regression on its own line,
    the flaky ones, the new failures' signatures, then the rest."""
    base = diff.baseline_run or "(none)"
    rerun = f" (re-run {diff.rerun_run})" if diff.rerun_run else ""
    lines = [f"run {diff.current_run} vs baseline {base}: {len(diff.regressions)} regression(s) in "
             f"{len(diff.regressed_architectures)} architecture(s), {len(diff.fixes)} fix(es), "
             f"{len(diff.missing)} missing, {len(diff.other)} other change(s); {len(diff.flaky)} flaky{rerun}; "
             f"{len(diff.moved)} determinant(s) moved"]
    lines += [f"moved      {m.line()}" for m in diff.moved]
    lines += [f"REGRESSION {c.line()}" for c in diff.regressions]
    lines += [f"flaky      {c.line()}" for c in diff.flaky]
    lines += [f"signature  {sig.line()}" for sig in diff.signatures]
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
