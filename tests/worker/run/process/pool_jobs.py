"""Tiny fake jobs for the pool tests: they run in pool workers (imported there by module name).

Each one exercises one pool behaviour (result, streaming, crash, hang, memory growth) without torch.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time


def add(a: int, b: int) -> int:
    print(f"adding {a} and {b}")
    print("to stderr", file=sys.stderr)
    return a + b


def stream(n: int, emit) -> int:  # noqa: ANN001 - the pool's callback
    for i in range(n):
        emit("step", {"i": i, "pid": os.getpid()})
    return n


def announce_then_sleep(seconds: float, emit) -> str:  # noqa: ANN001
    emit("pid", os.getpid())
    time.sleep(seconds)
    return "woke"


def die() -> None:
    print("about to die", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def boom() -> None:
    raise ValueError("bad input")


def grow(step_mb: int, total_mb: int) -> int:
    """Touch memory gradually (so RSS really grows) until total_mb; the pool should stop it first."""
    chunks = []
    for _ in range(total_mb // step_mb):
        chunks.append(bytearray(os.urandom(1)) * (step_mb * 2**20))
        time.sleep(0.02)
    return len(chunks)


def pid() -> int:
    return os.getpid()


def rendezvous(directory: str, parties: int) -> int:
    """Wait until ``parties`` tasks (this one included) are running at the same time, then return this pid. Only
    as many processes as tasks can get there: a single live worker would wait here until the pool's time limit."""
    here = os.path.join(directory, str(os.getpid()))
    with open(here, "w") as f:
        f.write("arrived")
    while len(os.listdir(directory)) < parties:
        time.sleep(0.02)
    return os.getpid()


def child_then_sleep(seconds: float, emit) -> str:  # noqa: ANN001
    """Start a grandchild (as the fsdp/tp checks start their ranks), report its pid, then sleep past the limit."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    emit("child", child.pid)
    time.sleep(seconds)
    return "woke"


def units(n: int, seconds: float, emit) -> int:  # noqa: ANN001 - the pool's callback
    """``n`` units of work, each announced as a "unit" event, each taking ``seconds``."""
    for i in range(n):
        emit("unit", i)
        time.sleep(seconds)
    return n


def at_exit_writes(path: str) -> None:
    """Warm-up: at the worker's exit, its atexit handlers run (what a stopped worker must still do: the rank pairs'
    close); this one writes ``path``."""
    atexit.register(lambda: open(path, "w").write(f"atexit ran in {os.getpid()}"))
