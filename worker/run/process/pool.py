"""A pool of long-lived worker subprocesses (torch/transformers imported once) that runs tasks in isolation.

Per-task time limit and memory limit (parent-side RSS watch, plus an address-space rlimit backstop in the child);
a crashed or killed worker is replaced and its task reported as crash/timeout/memory; events stream back live.
A task's descendant processes (the fsdp/tp checks' rank group) count against its memory limit and die with it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import shutil
import signal
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import psutil

from worker.run.process.by_name import resolve
from worker.run.process.capture import captured_output, process_local_bar_lock, read_from
from worker.run.process.quick_exit import exit_now

POLL_S = 0.05  # RSS/time watch period: an allocation spike between polls is caught by the rlimit backstop
# A descendant that names itself this (Linux comm, prctl PR_SET_NAME) holds no task's memory: a warm rank waiting
# between architectures (worker/run/ranks/group.py). It counts again as soon as it takes a job and renames itself.
IDLE_PROCESS_NAME = "compat-idle"
MAX_START_FAILURES = 3  # consecutive workers dying before "ready" -> the pool gives up (broken warm-up)
# One intra-op thread per architecture process, for every executor: tiny models (hidden ~64) lose more to thread
# sync than they gain (measured in bench/README.md: jobs=1 with 2 threads ran forward 5x and generate 2x slower per
# check than 1 thread). Parallelism comes from running architectures side by side instead.
ARCH_THREADS = 1


# A warm worker (torch 2.13 CPU, transformers 5.23 and neuron_backend imported, Python 3.11, Linux x86_64) holds
# 356 MB RSS before its first task (measured here with psutil after warm_worker(1, "neuron")). A memory limit at or
# below that kills every worker the moment it takes a task: a configuration error, not a result.
WORKER_IDLE_FLOOR_MB = 400


class PoolError(RuntimeError):
    """The pool cannot start workers at all."""


class MemoryLimitTooLow(PoolError, ValueError):
    """The per-architecture memory limit is below what an idle worker already uses (a configuration error)."""


def check_memory_limit(limit_mb: float, *, idle_mb: float | None = None, setting: str = "COMPAT_ARCH_MEMORY_MB"
                       ) -> None:
    """Refuse a memory limit no worker can stay under: at or below ``idle_mb`` (a started worker's measured RSS)
    when given, else at or below the documented floor of a harness worker (torch and transformers imported)."""
    floor = idle_mb if idle_mb is not None else WORKER_IDLE_FLOOR_MB
    if limit_mb <= floor:
        measured = f"a warm worker uses {idle_mb:.0f} MB before its first task" if idle_mb else \
            f"a warm worker uses about {WORKER_IDLE_FLOOR_MB} MB before its first task"
        raise MemoryLimitTooLow(f"memory limit {limit_mb:g} MB ({setting}) is too low: {measured}; "
                                f"set it above {floor:.0f} MB (default 6144)")


@dataclass
class Task:
    key: str
    fn: str  # "module:function", resolved in the worker
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    stream: bool = False  # pass an ``emit(kind, payload)`` callback to fn
    # A task that does several units of work, each under the time limit: its limit counts from its latest streamed
    # event of this kind (else from its start).
    clock_on: str | None = None


@dataclass
class Outcome:
    """How a task ended: ok (value), error (fn raised), crash (signal/exit), timeout, memory (limit exceeded)."""

    task: Task
    kind: str
    value: Any = None
    error: str | None = None
    exitcode: int | None = None
    duration_s: float = 0.0
    peak_rss_mb: float = 0.0
    log: str = ""  # what the task printed that its streamed events did not take (see capture.take_log)
    events: list[tuple[str, Any]] = field(default_factory=list)


@dataclass
class Event:
    """A streamed message from a running task (``done`` is None) or its final outcome."""

    task: Task
    kind: str
    payload: Any = None
    done: Outcome | None = None


def warm_imports(threads: int) -> None:
    """Default warm-up: import torch and transformers once, pin the thread count, silence progress bars."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no inductor subprocess pool per worker
    # The warm-up's job: a spawned worker imports torch and transformers here, once, before its first task.
    import torch
    import transformers

    torch.set_num_threads(max(1, threads))
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def _child_main(conn: Connection, warmup: str | None, warmup_args: tuple, as_limit_mb: int | None) -> None:
    process_local_bar_lock()  # a worker killed at its limit runs no finalizer
    if warmup:
        resolve(warmup)(*warmup_args)
    if as_limit_mb:
        # Backstop against a runaway allocation faster than the parent's RSS poll: cap the address space at
        # what is mapped now plus the limit (so the kernel refuses before the machine swaps).
        vms = psutil.Process().memory_info().vms
        cap = vms + as_limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    conn.send(("ready", os.getpid()))
    while True:
        msg = conn.recv()
        if msg is None:
            # Stopped: nothing is left to finish (every result is sent, every log closed); the atexit handlers
            # still run (the rank pairs' close), only the ~1 s of freeing torch's modules is skipped.
            exit_now(0)
        task_id, fn, args, kwargs, stream, log_path = msg
        with captured_output(Path(log_path)) as capture:
            # Every message says how much of the log the task's records have taken, so the parent's outcome
            # carries only the rest, even when the worker dies before its "done".
            if stream:
                kwargs = {**kwargs, "emit": lambda kind, payload, _id=task_id, _c=capture: conn.send(
                    ("event", _id, kind, payload, _c.taken))}
            try:
                value = resolve(fn)(*args, **kwargs)
                reply = ("done", task_id, "ok", value)
            except BaseException:  # noqa: BLE001 - report, keep serving
                traceback.print_exc()
                reply = ("done", task_id, "error", traceback.format_exc()[-4000:])
        conn.send((*reply, capture.taken))


@dataclass
class _Slot:
    proc: Any
    conn: Connection
    ready: bool = False
    task: Task | None = None
    task_id: int = -1
    started: float = 0.0
    clock: float = 0.0  # what the time limit counts from: the start, or the task's latest ``clock_on`` event
    log_path: str = ""
    log_taken: int = 0  # bytes of the task's log its streamed events took
    spawned: float = field(default_factory=time.monotonic)  # when the worker was started
    peak_rss: float = 0.0
    events: list[tuple[str, Any]] = field(default_factory=list)


class Pool:
    """``with Pool(jobs=2, time_limit_s=300, memory_limit_mb=6144) as p: for ev in p.run(tasks): ...``"""

    def __init__(self, jobs: int, *, time_limit_s: float, memory_limit_mb: int,
                 warmup: str | None = "worker.run.process.pool:warm_imports", warmup_args: tuple | None = None,
                 rlimit_backstop: bool = True) -> None:
        self.jobs = max(1, jobs)
        self.time_limit_s = time_limit_s
        self.memory_limit_mb = memory_limit_mb
        self.warmup = warmup
        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        self.warmup_args = warmup_args if warmup_args is not None else (threads,)
        # The backstop sits well above the watched limit so the RSS watch (a clean "memory" outcome) fires first.
        self.as_limit_mb = 2 * memory_limit_mb + 2048 if rlimit_backstop else None
        self._ctx = mp.get_context("spawn")
        self._slots: list[_Slot] = []
        self._logdir = Path(tempfile.mkdtemp(prefix="compat-pool-"))
        self._next_id = 0
        self._start_failures = 0
        self.replaced = 0  # workers replaced after a crash/kill (for tests and reports)
        self.start_s = 0.0  # summed over workers: spawn until ready (interpreter, warm-up imports)

    def __enter__(self) -> Pool:
        return self

    def start(self) -> Pool:
        """Start every worker now (``run`` starts them on its first call): their warm-up then overlaps what the
        caller does before its first ``run``."""
        while len(self._slots) < self.jobs:
            self._slots.append(self._spawn())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self) -> _Slot:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_child_main, args=(child, self.warmup, self.warmup_args, self.as_limit_mb),
                                 daemon=True)
        proc.start()
        child.close()
        return _Slot(proc, parent)

    def pids(self) -> list[int]:
        return [s.proc.pid for s in self._slots if s.proc.is_alive()]

    def _kill(self, slot: _Slot) -> None:
        # The worker's descendants (the 2-rank group of the fsdp/tp checks, worker/run/ranks/group.py) die with it: found
        # before the worker is killed (afterwards they are orphans, no longer its children), killed first.
        for child in _descendants(slot.proc.pid):
            try:
                child.kill()
            except psutil.Error:
                pass
        if slot.proc.is_alive():
            slot.proc.kill()
        slot.proc.join(timeout=5)
        slot.conn.close()

    def _finish(self, slot: _Slot, kind: str, **kw: Any) -> Outcome:
        task = slot.task
        assert task is not None
        log, _ = read_from(Path(slot.log_path), slot.log_taken)
        Path(slot.log_path).unlink(missing_ok=True)
        out = Outcome(task=task, kind=kind, duration_s=time.monotonic() - slot.started,
                      peak_rss_mb=slot.peak_rss, log=log, events=slot.events, **kw)
        slot.task, slot.events, slot.peak_rss, slot.log_taken = None, [], 0.0, 0
        return out

    def _replace(self, slot: _Slot) -> None:
        self._kill(slot)
        self._slots[self._slots.index(slot)] = self._spawn()
        self.replaced += 1

    def run(self, tasks: Iterable[Task]) -> Iterator[Event]:
        """Run every task; yields streamed events and one final Event (``done`` set) per task, as they happen."""
        pending = deque(tasks)
        self._logdir.mkdir(parents=True, exist_ok=True)  # a pool run again after its close gets its folder back
        while len(self._slots) < min(self.jobs, max(1, len(pending))):
            self._slots.append(self._spawn())
        running = 0
        while pending or running:
            for slot in self._slots:
                if slot.ready and slot.task is None and pending and slot.proc.is_alive():
                    task = pending.popleft()
                    self._next_id += 1
                    log_path = str(self._logdir / f"task-{self._next_id}.log")
                    try:
                        slot.conn.send((self._next_id, task.fn, task.args, task.kwargs, task.stream, log_path))
                    except OSError:  # died since the last check: requeue; the death branch replaces it
                        pending.appendleft(task)
                        continue
                    slot.task, slot.task_id, slot.started = task, self._next_id, time.monotonic()
                    slot.clock = slot.started
                    slot.log_path = log_path
                    running += 1
            waitables = [s.conn for s in self._slots] + [s.proc.sentinel for s in self._slots]
            ready = wait(waitables, timeout=POLL_S)
            for slot in list(self._slots):
                if slot.conn in ready:
                    try:
                        while slot.conn.poll():
                            msg = slot.conn.recv()
                            ev = self._handle(slot, msg)
                            if ev is not None:
                                if ev.done is not None:
                                    running -= 1
                                yield ev
                    except (EOFError, OSError):
                        pass  # the worker died; the sentinel branch below reports it
                if not slot.proc.is_alive():
                    slot.proc.join()
                    code = slot.proc.exitcode
                    if slot.task is not None:
                        running -= 1
                        yield self._done(self._finish(slot, "crash", exitcode=code,
                                                      error=f"worker exited with {_describe_exit(code)}"))
                    elif not slot.ready:
                        self._start_failures += 1
                        if self._start_failures >= MAX_START_FAILURES:
                            raise PoolError(f"worker failed to start {MAX_START_FAILURES} times "
                                            f"({_describe_exit(code)})")
                    if pending or running:
                        self._replace(slot)
                    continue
                if slot.task is None:
                    continue
                elapsed = time.monotonic() - slot.clock
                rss = tree_rss_mb(slot.proc.pid)
                slot.peak_rss = max(slot.peak_rss, rss)
                if elapsed > self.time_limit_s:
                    self._replace_after(slot)
                    running -= 1
                    yield self._done(self._finish(slot, "timeout", error=f"time limit {self.time_limit_s:g} s "
                                                                         f"exceeded"))
                elif rss > self.memory_limit_mb:
                    self._replace_after(slot)
                    running -= 1
                    yield self._done(self._finish(slot, "memory", error=f"memory limit {self.memory_limit_mb} MB "
                                                                        f"exceeded (RSS {rss:.0f} MB)"))

    def _replace_after(self, slot: _Slot) -> None:
        """Kill a worker that broke a limit and start its replacement; the slot object keeps the task info."""
        self._kill(slot)
        idx = self._slots.index(slot)
        new = self._spawn()
        self._slots[idx] = new
        self.replaced += 1

    @staticmethod
    def _done(outcome: Outcome) -> Event:
        return Event(outcome.task, "done", done=outcome)

    def _handle(self, slot: _Slot, msg: tuple) -> Event | None:
        if msg[0] == "ready":
            slot.ready = True
            self.start_s += time.monotonic() - slot.spawned
            self._start_failures = 0
            try:
                idle = psutil.Process(slot.proc.pid).memory_info().rss / 2**20
            except psutil.Error:
                return None
            # Measured, not assumed: a limit a warm worker already exceeds would turn every task into "memory".
            check_memory_limit(self.memory_limit_mb, idle_mb=idle)
            return None
        if msg[0] == "event" and slot.task is not None and msg[1] == slot.task_id:
            slot.events.append((msg[2], msg[3]))
            if msg[2] == slot.task.clock_on:
                slot.clock = time.monotonic()
            slot.log_taken = msg[4]
            return Event(slot.task, msg[2], msg[3])
        if msg[0] == "done" and slot.task is not None and msg[1] == slot.task_id:
            slot.log_taken = msg[4]
            if msg[2] == "ok":
                return self._done(self._finish(slot, "ok", value=msg[3]))
            return self._done(self._finish(slot, "error", error=msg[3]))
        return None

    def close(self) -> None:
        # Every idle worker is told to stop first, then all are awaited (a stopped worker skips the interpreter's
        # teardown: exit_now). One still warming up (a pool closed before its first run: the command stopped early)
        # has nothing to finish: it is killed at once.
        stopping = []
        for slot in self._slots:
            try:
                if slot.ready and slot.proc.is_alive() and slot.task is None:
                    slot.conn.send(None)
                    stopping.append(slot)
            except (OSError, BrokenPipeError):
                pass
        deadline = time.monotonic() + 2
        for slot in stopping:
            slot.proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for slot in self._slots:
            self._kill(slot)
        self._slots = []
        # The task logs are removed as each task ends; their folder goes with the pool (it was left in /tmp, empty,
        # by every pool: 170 of them after one session's sweeps and tests).
        shutil.rmtree(self._logdir, ignore_errors=True)


def _descendants(pid: int | None) -> list[psutil.Process]:
    if not pid:
        return []
    pids = _child_pids(pid)
    if pids is None:  # no /proc/PID/task/TID/children on this kernel: psutil's scan of every process
        try:
            return psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            return []
    out = []
    while pids:
        child = pids.pop()
        try:
            out.append(psutil.Process(child))
        except psutil.Error:
            continue
        pids += _child_pids(child) or []
    return out


def _child_pids(pid: int) -> list[int] | None:
    """``pid``'s children from ``/proc/PID/task/*/children`` (None where the kernel has no such file): the RSS watch
    asks every 50 ms per worker, and psutil's ``children()`` reads every process's stat file each time (~2 ms)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            if tid == str(pid) and os.path.exists(f"/proc/{pid}"):
                return None
        except OSError:
            continue
    return out


def tree_rss_mb(pid: int | None) -> float:
    """Resident memory of a worker and its descendants (a task's rank processes count against its limit), less
    the descendants idle between tasks (``IDLE_PROCESS_NAME``): what they hold is no architecture's."""
    total = 0.0
    try:
        procs = [psutil.Process(pid), *_descendants(pid)] if pid else []
    except psutil.Error:
        return 0.0
    for i, proc in enumerate(procs):
        try:
            if i and proc.name() == IDLE_PROCESS_NAME:
                continue
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
