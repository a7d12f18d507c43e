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


def stop(proc: subprocess.Popen, grace_s: float = 60.0) -> str:
    """Stop a served process and return all it printed: SIGTERM (uvicorn's graceful shutdown), then SIGKILL if it has
    not exited within ``grace_s``. A slow shutdown on a loaded box is not what these tests check; their output still is
    (test_serve_port timed out once under pytest -n 2 at load ~14, which wait was not recorded; the 30 s shutdown wait
    was its shortest bound)
    (started with PYTHONUNBUFFERED=1, so a SIGKILL loses none of it)."""
    proc.terminate()
    try:
        return proc.communicate(timeout=grace_s)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]
