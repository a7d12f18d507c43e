"""Every command of the program as run (``python -m cli.entry``, what the console script calls) ends by ``exit_now``
(no interpreter teardown): its whole output still reaches a pipe, and its exit code is the command's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _compat(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.entry", *argv], env={**os.environ, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_a_command_that_succeeds_prints_its_whole_output_and_exits_0(tmp_path: Path) -> None:
    folder = tmp_path / "refcache"
    out = _compat("cache", "info", env={"COMPAT_REFERENCE_CACHE": "1", "COMPAT_REFERENCE_CACHE_DIR": str(folder),
                                            "COLUMNS": "400"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("reference cache on: 0 entries") and str(folder) in out.stdout


def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    out = _compat("sweep", "--device", "no-such-device", env={"COMPAT_VAR_DIR": str(tmp_path)})
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and len(out.stderr.splitlines()) == 1 and out.stdout == ""
