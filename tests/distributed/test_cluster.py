"""A sweep on a real cluster: two `compat worker` processes on Redis, results in PostgreSQL, run closed and diffed."""

from __future__ import annotations

import time

from compat.results import Status, Trigger
from worker.orchestration.executors import CeleryExecutor


def wait_state(store, run_id: str, timeout: float = 240) -> str:
    """The run's state as the store has it; the last task closes the run without any follower. The timeout is
    only a hang guard: a loaded 2-core machine may take minutes."""
    from service.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with store.session() as s:
            state = s.get(Run, run_id).state
        if state != "running":
            return state
        time.sleep(0.2)
    return "running"


def test_fan_out_to_two_workers_last_task_closes_the_run_and_diff_finds_the_regression(
        shared_redis, pg_url, store, make_cluster):
    cluster = make_cluster(shared_redis, pg_url)
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    cluster.wait_ready()
    executor = CeleryExecutor(cluster.app())

    first = cluster.plan([cluster.entry(f"Arch{i}", rank=i, sleep_s=0.3) for i in range(6)], Trigger.NIGHTLY)
    run1 = executor.submit(store, first)
    # Nobody follows this run: the task that stores the last architecture must close it.
    assert wait_state(store, run1) == "complete"
    results = store.run_results(run1)
    assert sorted(r.key for r in results) == sorted(
        (f"Arch{i}", "neuron", c) for i in range(6) for c in ("load", "forward"))
    assert {r.status for r in results} == {Status.PASS}
    # Each architecture's captured output is stored with its results, as the in-process pool stores it.
    for i in range(6):
        logs = [r.log for r in results if r.architecture == f"Arch{i}" and r.log]
        execution = next(r.metrics["execution"] for r in results if r.architecture == f"Arch{i}")
        assert logs and f"fakearch: Arch{i} runs as {execution}" in logs[0], logs
        assert f"fakearch: Arch{i} native stderr" in logs[0]
    # Both workers took architectures (prefetch 1: an idle worker is never starved by a busy one).
    assert len({r.metrics["pid"] for r in results}) == 2

    # Second nightly: Arch2 now fails its checks, Arch4 vanished from the catalog.
    entries = [cluster.entry(f"Arch{i}", rank=i, **({"status": "mismatch"} if i == 2 else {}))
               for i in range(6) if i != 4]
    outcome = executor.run(store, cluster.plan(entries, Trigger.NIGHTLY))
    assert outcome.state == "complete"
    assert outcome.diff.baseline_run == run1
    assert [(c.architecture, c.check, c.after) for c in outcome.diff.regressions] == [
        ("Arch2", "forward", "mismatch"), ("Arch2", "load", "mismatch")]
    assert {c.architecture for c in outcome.diff.missing} == {"Arch4"}
    # A manual run is diffed against the previous manual run (none), never against a nightly.
    manual = executor.run(store, cluster.plan([cluster.entry("Arch0")], Trigger.MANUAL))
    assert manual.diff.baseline_run is None and manual.diff.regressions == []
