"""Progress of long commands (a sweep, following a cluster run, a Hub listing): a live bar on a terminal, and plain
lines when stdout is a log or a CI console, so a long run is never silent there.

Off a terminal each finished item is one line (``[ 12/181] LlamaForCausalLM: supported | 1m02s elapsed, eta
14m10s``), optionally at most one every ``every_s`` seconds, and a "still running" line whenever nothing was printed
for ``heartbeat_s`` seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from compat.results import ResultRecord, Status, arch_verdict

HEARTBEAT_S = 60.0  # the longest a log goes without a line while a command works
FETCH_LINE_S = 10.0  # a Hub listing reads up to thousands of configs: a log line at most this often
NOTE_CHARS = 60  # the bar's "last item" text on a terminal


def duration(seconds: float) -> str:
    """``45s``, ``3m05s``, ``2h01m``: short, fixed order, for a log line."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta(elapsed: float, done: int, total: int) -> str:
    """Time left at the mean pace so far; ``?`` before the first item."""
    if done >= total:
        return "0s"
    if done <= 0:
        return "?"
    return duration(elapsed / done * (total - done))


def arch_note(records: Iterable[ResultRecord]) -> str:
    """An architecture's verdict and its checks that did not pass: ``failing: forward unsupported_op
    [aten::histc (Int)], generate skipped``."""
    records = list(records)
    verdict = arch_verdict(records)
    bad = [f"{r.check} {r.status}" + (f" [{r.blocking_op}]" if r.blocking_op else "")
           for r in records if r.status != Status.PASS]
    return f"{verdict}: {', '.join(bad)}" if bad else verdict


class LineProgress:
    """Plain lines for a log: one per finished item (at most one every ``every_s`` seconds when set), and a
    "still running" line after ``heartbeat_s`` seconds without one. Thread-safe: the heartbeat prints from its own
    thread."""

    def __init__(self, console: Console, total: int, label: str, *, every_s: float = 0.0,
                 heartbeat_s: float = HEARTBEAT_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.console, self.total, self.label = console, total, label
        self.every_s, self.heartbeat_s, self.clock = every_s, heartbeat_s, clock
        self.done = 0
        self.started = self.last_line = self.last_item = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _counter(self) -> str:
        width = len(str(self.total))
        return f"[{self.done:>{width}}/{self.total}]"

    def _timing(self, now: float) -> str:
        elapsed = now - self.started
        return f"{duration(elapsed)} elapsed, eta {eta(elapsed, self.done, self.total)}"

    def _print(self, text: str, now: float) -> None:
        # soft_wrap: a log line is one line, whatever width rich guesses for a pipe.
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self.last_line = now

    def _item(self, what: str, note: str) -> None:
        now = self.clock()
        self.last_item = now
        if self.every_s and self.done < self.total and now - self.last_line < self.every_s:
            return
        head = f"{self._counter()} {self.label}"
        body = f"{what}: {note}" if what and note else (what or note)
        self._print(f"{head} {body} | {self._timing(now)}" if body else f"{head} | {self._timing(now)}", now)

    def advance(self, what: str, note: str = "") -> None:
        with self._lock:
            self.done += 1
            self._item(what, note)

    def update(self, done: int, note: str = "") -> None:
        with self._lock:
            if done == self.done:
                return
            self.done = done
            self._item("", note)

    def heartbeat(self) -> bool:
        """Print a "still running" line if nothing was printed for ``heartbeat_s``; True if it printed."""
        with self._lock:
            now = self.clock()
            if self.done >= self.total or now - self.last_line < self.heartbeat_s:
                return False
            quiet = duration(now - self.last_item)
            self._print(f"{self._counter()} {self.label} still running, nothing finished for {quiet} | "
                        f"{self._timing(now)}", now)
            return True

    def _beat(self) -> None:
        while not self._stop.wait(min(self.heartbeat_s / 4, 5.0)):
            self.heartbeat()

    def __enter__(self) -> LineProgress:
        with self._lock:
            self._print(f"{self._counter()} {self.label}: {self.total} to do", self.clock())
        self._thread = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class BarProgress:
    """rich's live bar, for a terminal: done/total, elapsed, eta and the last item."""

    def __init__(self, console: Console, total: int, label: str) -> None:
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                            TextColumn("{task.fields[last]}"), console=console, transient=False)
        self.task = self.bar.add_task(label, total=total, last="")

    def advance(self, what: str, note: str = "") -> None:
        self.bar.update(self.task, advance=1, last=f"{what} {note}".strip()[:NOTE_CHARS])

    def update(self, done: int, note: str = "") -> None:
        self.bar.update(self.task, completed=done, last=note[:NOTE_CHARS])

    def __enter__(self) -> BarProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.bar.__exit__(exc_type, exc, tb)


def reporter(console: Console, total: int, label: str, *, every_s: float = 0.0,
             heartbeat_s: float = HEARTBEAT_S) -> BarProgress | LineProgress:
    """The bar on a terminal, lines otherwise (a pipe, a file, CI)."""
    if console.is_terminal:
        return BarProgress(console, total, label)
    return LineProgress(console, total, label, every_s=every_s, heartbeat_s=heartbeat_s)


@contextmanager
def fetch_progress(console: Console, listed: int) -> Iterator[Callable[[int, int, str], None]]:
    """The ``progress(done, total, model_id)`` callback of a Hub listing's config reads, shown like a sweep's
    progress (a log gets a line at most every ``FETCH_LINE_S``); it starts when the listing's size is known."""
    shown: list[BarProgress | LineProgress] = []

    def on_fetch(done: int, total: int, model_id: str) -> None:
        if not shown:
            console.print(f"listed {total} of up to {listed} text-generation models; reading their configs",
                          highlight=False, soft_wrap=True)
            shown.append(reporter(console, total, "configs", every_s=FETCH_LINE_S).__enter__())
        shown[0].update(done, model_id)

    try:
        yield on_fetch
    finally:
        if shown:
            shown[0].__exit__(None, None, None)
