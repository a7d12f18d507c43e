"""`compat serve` on a port in use: one line naming the port, ``--port`` and ``COMPAT_PORT``, exit 2, never
uvicorn's errno (issue 19); on a free port it serves on the socket it checked (no window for another process)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from served import stop, wait_until_healthy

from cli.serve import listen

COMPAT = [sys.executable, "-c", "from cli.app import main; main()"]
ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
            "COMPAT_VAR_DIR": str(tmp_path / "var")}


def test_listen_names_other_bind_failures_in_one_line() -> None:
    with pytest.raises(typer.Exit) as exc:
        listen("192.0.2.1", 8000)  # TEST-NET-1: not an address of this machine
    assert exc.value.exit_code == 2


def test_a_free_port_serves_on_the_socket_it_checked(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([*COMPAT, "serve", "--port", str(port)], cwd=ROOT, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_healthy(proc, f"http://127.0.0.1:{port}", "compat serve")
        # While it serves, a second `compat serve` on the same port is the one-line refusal, never uvicorn's errno.
        second = subprocess.run([*COMPAT, "serve", "--port", str(port)], cwd=ROOT, env=_env(tmp_path),
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip() == f"error: port {port} on 127.0.0.1 is in use: pass --port N or set COMPAT_PORT"
        assert "Errno" not in second.stdout + second.stderr
    finally:
        out = stop(proc)
    assert f"serving on http://127.0.0.1:{port}" in out
