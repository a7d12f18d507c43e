"""Waiting for a served app started as a process (``compat serve``, compose's uvicorn command): polled until its
``/healthz`` answers 200, failing with the process's output if it exits first or does not answer in time."""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_until_healthy(proc: subprocess.Popen, base_url: str, what: str, timeout_s: float = 120.0) -> None:
    """Return once ``base_url``/healthz answers 200; ``proc``'s stdout must be a text pipe (read on failure)."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, proc.stdout.read()
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{what} did not start"
        time.sleep(0.3)
