"""What one architecture run printed, Python and native code alike: captured into a file at the fd level.

A record takes the output printed since the record before it (``take_log``), so each result row is written once,
with its own part of the log; both executors capture the same way, so logs read alike from the pool and Celery.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import tqdm.std

from compat.results import ResultRecord, Status

LOG_TAIL_BYTES = 16_384  # captured stdout/stderr kept per piece of log (the tail of a longer one)


def process_local_bar_lock() -> None:
    """Give progress bars (Transformers' "Loading weights", datasets') a thread lock instead of tqdm's
    cross-process one, in a process whose output is captured to its own file (a pool worker, a rank).

    tqdm creates a ``multiprocessing.RLock`` for its bars (tqdm 4.70 tqdm/std.py
    ``TqdmDefaultWriteLock.create_mp_lock``): under the spawn/forkserver start methods a named semaphore, registered
    with the resource tracker and released only by a finalizer. Ranks leave by ``os._exit`` and killed workers by
    SIGKILL, so none ran: one semaphore per rank stayed in /dev/shm for the life of the sweeping process (472 after
    one nightly set, "leaked semaphore objects" at exit; a Celery worker lives for weeks). No other process writes
    to these logs, so nothing needs the cross-process lock."""
    tqdm.std.TqdmDefaultWriteLock.mp_lock = None  # create_mp_lock makes one only while the attribute is absent


class Capture:
    """An open capture: the file this process's output goes to, and how far into it records have taken it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.taken = 0  # bytes of the file already carried by a record

    def take(self, limit: int = LOG_TAIL_BYTES) -> str:
        """The output since the previous take (its last ``limit`` bytes); later takes start after it."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        text, self.taken = read_from(self.path, self.taken, limit)
        return text


_active: Capture | None = None  # the capture of this process, if any: descriptors 1 and 2 are process-wide too


@contextmanager
def captured_output(path: Path) -> Iterator[Capture]:
    """Within the block, file descriptors 1 and 2 and ``sys.stdout``/``sys.stderr`` all write to ``path``; restored
    after, also on error. Descriptors catch native code (torch's C++ warnings); ``sys.*`` are swapped as well
    because a Celery pool process replaces them with logging proxies that never reach fd 1. Both are process-wide:
    one architecture per process at a time, as in the in-process pool and Celery's prefork (`compat worker`) and
    solo pools; a threads pool would interleave its tasks' logs."""
    global _active
    old_streams, old_active = (sys.stdout, sys.stderr), _active
    for stream in old_streams:
        stream.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    saved = os.dup(1), os.dup(2)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # Line-buffered and shared by both names, so prints and tracebacks interleave in the order they happened.
    text = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = sys.stderr = text
    _active = Capture(path)
    try:
        yield _active
    finally:
        text.flush()
        _active = old_active
        sys.stdout, sys.stderr = old_streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for d in (fd, *saved):
            os.close(d)


def take_log() -> str | None:
    """The output printed since the previous take in this process, or None when its output is not captured
    (an in-process debugging sweep) or nothing was printed."""
    return (_active.take() or None) if _active is not None else None


def read_from(path: Path, offset: int, limit: int = LOG_TAIL_BYTES) -> tuple[str, int]:
    """(the file's bytes after ``offset``, at most the last ``limit`` of them; the file's end) ("" if missing)."""
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(offset, end - limit))
            return fh.read().decode("utf-8", "replace"), end
    except OSError:
        return "", offset


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a captured log ("" if it is missing)."""
    return read_from(path, 0, limit)[0]


def attach_log(records: list[ResultRecord], log: str | None) -> None:
    """Put output that no record carried (a stand-in runner's, a worker's last words) on the records that carry no
    log of their own: the first one and every non-pass, where a reader of a failure looks for it."""
    if not log:
        return
    for i, rec in enumerate(records):
        if rec.log is None and (i == 0 or rec.status != Status.PASS):
            rec.log = log
