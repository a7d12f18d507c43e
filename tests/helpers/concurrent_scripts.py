"""Run one Python script in several fresh interpreters at once: for failures that show only at process exit (an
abort in interpreter finalization), where each copy is one more chance to meet them."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def run_copies(code: str, copies: int, *, workers: int = 4, timeout: float = 300) -> list[subprocess.CompletedProcess]:
    """``copies`` runs of ``python -c code``, ``workers`` at a time; asserts every one exited 0 (the failing copy's
    return code and the end of its stderr in the message) and returns them for the caller's own checks."""
    with ThreadPoolExecutor(workers) as pool:
        runs = list(pool.map(lambda _: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                      timeout=timeout), range(copies)))
    for done in runs:
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return runs
