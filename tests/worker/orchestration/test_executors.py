"""run_pair (the Celery task's body): a pair's records are stored once, with the run's output and op trace; a runner
that raises or forgets a check still leaves a complete, explained set of records."""

from __future__ import annotations

import os
import time
from pathlib import Path

from billiard.exceptions import SoftTimeLimitExceeded

from compat.results import ArchitectureEntry, Check, OpTrace, ResultRecord, Status
from worker.orchestration.executors import run_pair
from worker.run.process.capture import take_log


class _Store:
    def __init__(self) -> None:
        self.results: list[ResultRecord] = []
        self.traces: list[OpTrace] = []
        self.writes = 0

    def stored_pairs(self, run_id: str) -> set[tuple[str, str]]:
        return {(r.architecture, r.device) for r in self.results}

    def add_op_traces(self, run_id: str, traces: list[OpTrace]) -> None:
        self.traces += traces

    def add_results(self, run_id: str, records: list[ResultRecord]) -> None:
        self.writes += 1
        self.results += records


def test_run_pair_stores_the_runs_output_with_its_records(tmp_path: Path) -> None:
    entry = ArchitectureEntry(name="Tiny", model_type="tiny", rank=1)

    def runner(entry, device, checks, **_):  # noqa: ANN001, ANN202
        print("building Tiny")
        os.write(2, b"native warning\n")
        return [ResultRecord(architecture=entry.name, rank=1, device=device, check=c,
                             status=Status.PASS if c == Check.LOAD else Status.MISMATCH) for c in checks]

    store = _Store()
    assert run_pair(store, "r1", entry, "neuron", [Check.LOAD, Check.FORWARD], seed=0, workdir=tmp_path,
                    runner=runner) == "ran"
    # On the first record and on every non-pass (as the in-process sweep attaches it); no log file left behind.
    assert [("building Tiny" in (r.log or ""), "native warning" in (r.log or "")) for r in store.results] == [
        (True, True), (True, True)]
    assert list(tmp_path.glob("*.log")) == []


def test_run_pair_keeps_the_traceback_of_a_runner_that_raised(tmp_path: Path) -> None:
    def runner(*_, **__):  # noqa: ANN002, ANN003, ANN202
        raise ValueError("hook bug")

    store = _Store()
    run_pair(store, "r1", ArchitectureEntry(name="Tiny", model_type="tiny", rank=1), "neuron", [Check.LOAD],
             seed=0, workdir=tmp_path, runner=runner)
    [rec] = store.results
    assert rec.status == Status.HARNESS_ERROR and "ValueError: hook bug" in (rec.log or "")


def test_run_pair_writes_each_record_once_with_the_part_of_the_log_it_took(tmp_path: Path) -> None:
    # As the real runner does: each record takes the output printed since the previous one, and streams a trace.
    def runner(entry, device, checks, *, emit, **_):  # noqa: ANN001, ANN202
        out = []
        for c in checks:
            print(f"running {c}")
            rec = ResultRecord(architecture=entry.name, device=device, check=c, status=Status.PASS)
            rec.log = take_log()
            out.append(rec)
        emit("trace", OpTrace(architecture=entry.name, ops=["aten::mm (Float)"]))
        return out

    store = _Store()
    run_pair(store, "r1", ArchitectureEntry(name="Tiny", model_type="tiny", rank=1), "cpu",
             [Check.LOAD, Check.FORWARD], seed=0, workdir=tmp_path, runner=runner)
    assert store.writes == 1
    assert [(str(r.check), r.log) for r in store.results] == [("load", "running load\n"),
                                                              ("forward", "running forward\n")]
    assert store.traces == [OpTrace(architecture="Tiny", ops=["aten::mm (Float)"])]


def test_run_pair_records_a_check_the_runner_forgot(tmp_path: Path) -> None:
    def runner(entry, device, checks, **_):  # noqa: ANN001, ANN202
        return [ResultRecord(architecture=entry.name, device=device, check=Check.LOAD, status=Status.PASS)]

    store = _Store()
    run_pair(store, "r1", ArchitectureEntry(name="Tiny", model_type="tiny", rank=1), "cpu",
             [Check.LOAD, Check.FORWARD], seed=0, workdir=tmp_path, runner=runner)
    forgot = store.results[1]
    assert (forgot.check, forgot.status, forgot.error.type) == (Check.FORWARD, Status.HARNESS_ERROR, "MissingResult")
    assert run_pair(store, "r1", ArchitectureEntry(name="Tiny", model_type="tiny", rank=1), "cpu",
                    [Check.LOAD], seed=0, workdir=tmp_path, runner=runner) == "skipped"
    assert store.writes == 1


def _soft_limit_runner(raises: int):  # noqa: ANN202
    """A runner whose first ``raises`` calls get Celery's soft-limit exception, as a pool process's signal gives it."""
    calls = []

    def runner(entry, device, checks, **_):  # noqa: ANN001, ANN202
        calls.append(entry.name)
        if len(calls) <= raises:
            raise SoftTimeLimitExceeded()
        return [ResultRecord(architecture=entry.name, device=device, check=c, status=Status.PASS) for c in checks]

    return runner, calls


def test_a_soft_limit_signal_long_before_the_tasks_limit_reruns_instead_of_blaming_the_architecture(
        tmp_path: Path) -> None:
    # The task started just now under a 300 s soft limit: a soft-limit exception now was another task's timer.
    runner, calls = _soft_limit_runner(raises=1)
    store = _Store()
    run_pair(store, "r1", ArchitectureEntry(name="Tiny", model_type="tiny", rank=1), "neuron", [Check.LOAD],
             seed=0, workdir=tmp_path, runner=runner, soft_limit_s=300.0, started=time.monotonic())
    assert calls == ["Tiny", "Tiny"]
    [rec] = store.results
    assert rec.status == Status.PASS
    assert "not this task's; running the architecture again" in rec.log


def test_a_soft_limit_at_the_tasks_own_limit_is_the_architectures_timeout(tmp_path: Path) -> None:
    runner, calls = _soft_limit_runner(raises=1)
    store = _Store()
    # Started 301 s ago under a 300 s limit: the signal is this task's own.
    run_pair(store, "r1", ArchitectureEntry(name="Tiny", model_type="tiny", rank=1), "neuron", [Check.LOAD],
             seed=0, workdir=tmp_path, runner=runner, soft_limit_s=300.0, started=time.monotonic() - 301.0)
    assert calls == ["Tiny"]
    assert [(r.status, r.reason) for r in store.results] == [(Status.TIMEOUT, "soft time limit exceeded")]


def test_a_second_early_soft_limit_signal_ends_in_timeout_not_a_loop(tmp_path: Path) -> None:
    runner, calls = _soft_limit_runner(raises=5)
    store = _Store()
    run_pair(store, "r1", ArchitectureEntry(name="Tiny", model_type="tiny", rank=1), "neuron", [Check.LOAD],
             seed=0, workdir=tmp_path, runner=runner, soft_limit_s=300.0, started=time.monotonic())
    assert calls == ["Tiny", "Tiny"]
    assert [r.status for r in store.results] == [Status.TIMEOUT]
