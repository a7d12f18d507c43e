"""What one architecture run printed, Python and native code alike: captured into a file at the fd level, tail kept.

Both executors use it, so a result's log reads the same from the in-process pool and from a Celery worker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from compat.results import ResultRecord, Status

LOG_TAIL_BYTES = 16_384  # per-architecture captured stdout/stderr kept with its results


@contextmanager
def captured_output(path: Path) -> Iterator[None]:
    """Within the block, file descriptors 1 and 2 and ``sys.stdout``/``sys.stderr`` all write to ``path``; restored
    after, also on error. Descriptors catch native code (torch's C++ warnings); ``sys.*`` are swapped as well
    because a Celery pool process replaces them with logging proxies that never reach fd 1. Both are process-wide:
    one architecture per process at a time, as in the in-process pool and Celery's prefork (`compat worker`) and
    solo pools; a threads pool would interleave its tasks' logs."""
    old_streams = sys.stdout, sys.stderr
    for stream in old_streams:
        stream.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    saved = os.dup(1), os.dup(2)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # Line-buffered and shared by both names, so prints and tracebacks interleave in the order they happened.
    text = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = sys.stderr = text
    try:
        yield
    finally:
        text.flush()
        sys.stdout, sys.stderr = old_streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for d in (fd, *saved):
            os.close(d)


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a captured log ("" if it is missing)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def attach_log(records: list[ResultRecord], log: str) -> None:
    """Keep the architecture's captured log with its results: on its first record and on every non-pass."""
    if not log:
        return
    for i, rec in enumerate(records):
        if i == 0 or rec.status != Status.PASS:
            rec.log = log
