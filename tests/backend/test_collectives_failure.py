"""A rank that hangs or dies mid-job: the surviving rank's collective fails with an error naming the collective,
within the process group's timeout, and nothing (process, port) outlives the run.

The failure phase ends the shared two-rank run (two_ranks.shared_run): rank 1 first stalls outside a collective
with its connections open, then is killed with SIGKILL by the test; rank 0 meets each in an all_reduce.
"""

from __future__ import annotations

import signal

from two_ranks import leaks, shared_run


def _failures() -> dict:
    run = shared_run()
    assert not run.timed_out, f"the survivor did not give up by itself\n{run.describe()}"
    assert run.returncodes[0] == 0 and run.failures is not None, run.describe()
    return run.failures


def test_hung_rank_makes_the_survivor_fail_at_the_group_timeout():
    hung = _failures()["hung"]
    assert "timed out" in hung["outcome"].lower(), hung  # gloo's own timeout, set from the group's
    assert hung["collective"] == "c10d::allreduce_"  # the error names the collective that could not finish


def test_killed_rank_makes_the_survivor_fail_cleanly():
    killed = _failures()["killed"]
    run = shared_run()
    assert run.killed_by_test == [1] and run.returncodes == [0, -signal.SIGKILL]
    assert killed["outcome"] != "completed" and killed["collective"] == "c10d::allreduce_", killed


def test_the_run_leaves_no_process_or_port_behind():
    assert leaks(shared_run()) == []
