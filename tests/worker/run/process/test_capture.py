"""captured_output / take_log / read_tail / attach_log: a run's output (Python and fd-level) is captured, and each
record takes the part printed since the record before it."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from pathlib import Path

import pytest

from compat.results import Check, ResultRecord, Status
from worker.run.process.capture import (
    attach_log,
    captured_output,
    process_local_bar_lock,
    read_from,
    read_tail,
    take_log,
)


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


def test_each_take_returns_the_output_since_the_previous_one(tmp_path: Path) -> None:
    assert take_log() is None  # output not captured: nothing to take
    with captured_output(tmp_path / "c.log") as capture:
        print("building")
        os.write(2, b"native warning\n")
        first = take_log()
        print("forward: pass")
        second = take_log()
        third = take_log()
        print("after the last record")
    assert (first, second, third) == ("building\nnative warning\n", "forward: pass\n", None)
    assert read_from(tmp_path / "c.log", capture.taken) == ("after the last record\n", capture.taken + 22)
    assert take_log() is None  # the capture ended with its block


def test_a_long_piece_keeps_its_tail_and_the_next_take_starts_after_it(tmp_path: Path) -> None:
    with captured_output(tmp_path / "d.log") as capture:
        print("x" * 100 + "END")
        assert capture.take(limit=4) == "END\n"
        print("next")
        assert capture.take() == "next\n"


def test_attach_log_fills_only_records_without_their_own_log() -> None:
    recs = [ResultRecord(architecture="A", device="cpu", check=c, status=s, log=own)
            for c, s, own in ((Check.LOAD, Status.PASS, None), (Check.FORWARD, Status.PASS, None),
                              (Check.GENERATE, Status.CRASH, None), (Check.TRAIN, Status.SKIPPED, "its own"))]
    attach_log(recs, "last words")
    assert [r.log for r in recs] == ["last words", None, "last words", "its own"]
    attach_log(recs[1:2], "")
    assert recs[1].log is None


def _bar_semaphores(local_lock: bool) -> None:
    """In a spawned child, as a pool worker (a rank is forked from a forkserver: the same rule): count the named semaphores a progress bar registers with the resource
    tracker (each one leaks when the process leaves by os._exit or SIGKILL); the count is the exit code. This
    child leaves by sys.exit, so multiprocessing's finalizers release the control run's semaphore."""
    from multiprocessing import resource_tracker

    import tqdm.std

    made = []
    real = resource_tracker.register
    resource_tracker.register = lambda name, rtype: (made.append(rtype), real(name, rtype))
    if local_lock:
        process_local_bar_lock()
    with open(os.devnull, "w") as sink:
        for _ in tqdm.std.tqdm(range(3), file=sink):
            pass
    sys.exit(made.count("semaphore"))


def test_bars_in_a_rank_or_worker_make_no_named_semaphore() -> None:
    # Before: tqdm's cross-process lock left one /dev/shm semaphore per rank for the life of the sweeping
    # process (472 after a nightly set). The control run shows the count is real: without the thread lock a
    # spawned child registers one.
    # spawn, not forkserver: the forkserver is one per process, and starting it here would fix the environment
    # every later rank group of this test process inherits (worker/run/ranks/group.py preloads its own).
    ctx = mp.get_context("spawn")
    codes = {}
    for local in (False, True):
        proc = ctx.Process(target=_bar_semaphores, args=(local,))
        proc.start()
        proc.join(timeout=120)
        codes[local] = proc.exitcode
    assert codes == {False: 1, True: 0}
