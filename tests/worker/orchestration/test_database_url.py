"""A database URL nothing can open is one line naming COMPAT_DATABASE_URL and its value, exit 2, before a sweep
starts (issue 19: a 104-440-line traceback, and the sweep had started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _compat(tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COMPAT_DATABASE_URL": url, "COMPAT_VAR_DIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "worker.orchestration.cli", *args], env=env, capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).resolve().parents[3])


@pytest.mark.parametrize("url", ["bogus://x", "sqlite:///{tmp}/a-file/x.db"])
def test_a_database_url_nothing_can_open_is_one_line(tmp_path: Path, url: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    url = url.format(tmp=tmp_path)
    done = _compat(tmp_path, url, "runs", "list")
    out = (done.stdout + done.stderr).strip()
    assert done.returncode == 2 and out.startswith(f"error: COMPAT_DATABASE_URL={url!r}"), out
    assert len(out.splitlines()) == 1 and "Traceback" not in out


def test_a_sweep_with_a_bad_database_url_runs_nothing(tmp_path: Path) -> None:
    done = _compat(tmp_path, "bogus://x", "sweep", "--device", "cpu", "--arch", "GPT2LMHeadModel", "--jobs", "0")
    out = (done.stdout + done.stderr).strip()
    assert done.returncode == 2 and out.splitlines()[-1].startswith("error: COMPAT_DATABASE_URL='bogus://x'"), out
    assert "to do" not in out and "[compat]" not in out  # nothing started
