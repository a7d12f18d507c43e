"""``make run PORT=<busy>`` fails at once, naming ``PORT=`` (issue 30: it swept for minutes, then suggested
``COMPAT_PORT``, which make ignores): the Makefile checks the port before the database and the sweep."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_on_a_busy_port_fails_before_the_sweep_naming_port(tmp_path: Path) -> None:
    stamp = tmp_path / "installed"  # stands in for .venv/.installed: the venv running this test is the install
    stamp.touch()
    db = tmp_path / "compat.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "COMPAT_VAR_DIR": str(tmp_path / "var"),
           "COMPAT_DATABASE_URL": f"sqlite:///{db}"}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(["make", "--no-print-directory", "run", f"PORT={port}",
                               f"BIN={Path(sys.executable).parent}", f"STAMP={stamp}",
                               "SWEEP_ARGS=--device cpu --arch LlamaForCausalLM"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert f"error: port {port} on 127.0.0.1 is in use: pass PORT=N to make" in done.stderr, done.stderr
    assert "COMPAT_PORT" not in done.stderr
    # Nothing after the check ran: no migration (no store file), no sweep.
    assert not db.exists()
    assert "compat sweep" not in done.stdout and "LlamaForCausalLM" not in done.stdout + done.stderr
