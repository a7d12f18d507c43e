"""``exit_now``: the exit code, and what the interpreter does before its teardown (threads awaited, atexit handlers
run, buffered output flushed), all kept when the teardown is skipped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

SCRIPT = """
import atexit, sys, threading, time
from worker.run.process.quick_exit import exit_now
atexit.register(lambda: sys.stdout.write("|atexit ran"))
def late():
    time.sleep(0.3)
    sys.stdout.write("|thread done")
threading.Thread(target=late).start()
sys.stdout.write("buffered")  # stdout is a pipe: block-buffered, nothing written yet
exit_now(3)
"""


def test_exit_now_keeps_the_code_the_threads_the_handlers_and_the_output() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "buffered|thread done|atexit ran"

