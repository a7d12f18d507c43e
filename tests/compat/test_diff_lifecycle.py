"""The gate's verdict (compat.diff.gate) and the run lifecycle rule (compat.lifecycle.lost_owner), pure."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from compat.diff import diff_results, gate
from compat.lifecycle import lost_owner, pid_alive
from compat.results import Check, ResultRecord, Status


def rec(arch: str, check: Check, status: Status) -> ResultRecord:
    return ResultRecord(architecture=arch, device="neuron", check=check, status=status)


@pytest.mark.parametrize("state", ["incomplete", "interrupted", "running"])
def test_a_run_that_did_not_complete_fails_the_gate_with_its_missing_count(state: str) -> None:
    clean = diff_results([rec("A", Check.LOAD, Status.PASS)], [rec("A", Check.LOAD, Status.PASS)], current_run="r2")
    verdict = gate(clean, state=state, planned=12, missing=4, fail_on_regression=True)
    assert verdict.code == 1 and verdict.lines[0] == f"run r2 is {state}: 4 of 12 planned result(s) missing"
    # Reported, not gated, without --fail-on-regression.
    assert gate(clean, state=state, planned=12, missing=4, fail_on_regression=False).code == 0


def test_a_complete_run_fails_the_gate_only_on_a_regression() -> None:
    ok = diff_results([rec("A", Check.LOAD, Status.PASS)], [rec("A", Check.LOAD, Status.PASS)], current_run="r")
    assert gate(ok, state="complete", planned=1, missing=0, fail_on_regression=True).code == 0
    bad = diff_results([rec("A", Check.LOAD, Status.PASS)], [rec("A", Check.LOAD, Status.OOM)], current_run="r")
    assert gate(bad, state="complete", planned=1, missing=0, fail_on_regression=True).code == 1


def test_no_verdict_is_missing_never_a_regression_and_a_selection_removes_nothing() -> None:
    before = [rec("A", Check.LOAD, Status.PASS), rec("B", Check.LOAD, Status.PASS)]
    now = [rec("A", Check.LOAD, Status.HARNESS_ERROR)]
    diff = diff_results(before, now, only=["A"])
    assert diff.regressions == [] and [(c.architecture, c.after) for c in diff.missing] == [("A", "harness_error")]
    assert diff_results(before, now).missing[-1].architecture == "B"  # without the selection, B is missing


NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def test_lost_owner_dead_pid_on_this_host_or_silence() -> None:
    def alive(pid: int) -> bool:
        return pid == 1

    kw = {"now": NOW, "this_host": "h1", "alive": alive, "silence_s": 600}
    recent = NOW - timedelta(seconds=30)
    assert lost_owner(owner_host="h1", owner_pid=1, heartbeat=recent, **kw) is None
    assert lost_owner(owner_host="h1", owner_pid=2, heartbeat=recent, **kw) == "owner process 2 on h1 is gone"
    # Another host's pid is not checked here: only the heartbeat's silence counts.
    assert lost_owner(owner_host="h2", owner_pid=2, heartbeat=recent, **kw) is None
    assert lost_owner(owner_host="h2", owner_pid=2, heartbeat=NOW - timedelta(seconds=601), **kw) == \
        "no heartbeat for 601 s (limit 600 s)"
    # A broker run has no owner process: silence only.
    assert lost_owner(owner_host=None, owner_pid=None, heartbeat=recent, **kw) is None


def test_pid_alive_sees_this_process_and_not_a_reaped_one() -> None:
    assert pid_alive(os.getpid())
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert not pid_alive(pid)
