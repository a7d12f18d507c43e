"""captured_output / read_tail / run_pair: a run's output (Python and fd-level) is kept with its results."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from compat.results import ArchitectureEntry, Check, ResultRecord, Status
from worker.orchestration.executors import run_pair
from worker.run.capture import captured_output, read_tail


def test_captures_python_and_descriptor_output_and_restores_both(tmp_path: Path) -> None:
    before = sys.stdout, sys.stderr, os.fstat(1).st_ino, os.fstat(2).st_ino
    log = tmp_path / "a.log"
    with pytest.raises(RuntimeError), captured_output(log):
        print("from print")
        print("from stderr", file=sys.stderr)
        os.write(1, b"raw fd 1\n")
        os.write(2, b"raw fd 2\n")
        raise RuntimeError("boom")
    assert (sys.stdout, sys.stderr, os.fstat(1).st_ino, os.fstat(2).st_ino) == before
    assert read_tail(log).splitlines() == ["from print", "from stderr", "raw fd 1", "raw fd 2"]


def test_read_tail_keeps_the_end_and_tolerates_a_missing_file(tmp_path: Path) -> None:
    log = tmp_path / "b.log"
    log.write_bytes(b"x" * 100 + b"END")
    assert read_tail(log, limit=5) == "xxEND"
    assert read_tail(tmp_path / "missing.log") == ""


class _Store:
    def __init__(self) -> None:
        self.results: list[ResultRecord] = []

    def stored_pairs(self, run_id: str) -> set[tuple[str, str]]:
        return {(r.architecture, r.device) for r in self.results}

    def add_op_traces(self, run_id: str, traces: list) -> None:
        pass

    def add_results(self, run_id: str, records: list[ResultRecord]) -> None:
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
    assert rec.status == Status.ERROR and "ValueError: hook bug" in (rec.log or "")
