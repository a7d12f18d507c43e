"""Where the per-model sweep runs (issue 33). The nightly set: `.github/workflows/nightly.yml`'s pinned job runs
`compat sweep --models` after the architecture gate, even when the gate went red, before the database is saved; that
command line is one the CLI accepts and hands to the per-model sweep (not a typo that fails every night). `make run`
does not run it and prints how to (`make models`).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from cli import lazy
from cli.app import app

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"


def _steps() -> list[dict]:
    return yaml.safe_load(NIGHTLY.read_text())["jobs"]["sweep"]["steps"]


def _index(steps: list[dict], needle: str) -> int:
    hits = [i for i, s in enumerate(steps) if needle in s.get("run", "") or needle in s.get("name", "")]
    assert len(hits) == 1, f"{needle!r}: {len(hits)} steps of nightly.yml's sweep job"
    return hits[0]


def _models_command(steps: list[dict]) -> list[str]:
    run = steps[_index(steps, "compat sweep --models")]["run"]
    line = next(ln for ln in run.splitlines() if "compat sweep --models" in ln)
    argv = shlex.split(line.split("|")[0])
    assert argv[0].endswith("compat")
    return argv[1:]


def test_the_nightly_runs_the_per_model_sweep_after_the_gate_and_before_the_database_is_saved() -> None:
    steps = _steps()
    gate = _index(steps, "--fail-on-regression")
    models = _index(steps, "compat sweep --models")
    save = _index(steps, "Save the results database")
    assert gate < models < save
    # A red gate (a regression) must not skip it: GitHub skips a step after a failed one unless its `if` says so.
    assert steps[models].get("if", "").replace(" ", "") in ("${{!cancelled()}}", "${{always()}}", "always()",
                                                            "!cancelled()")
    # Its output pipes through tee: without pipefail a failed sweep would read as a green step.
    assert "set -o pipefail" in steps[models]["run"]


def test_the_nightly_models_command_reaches_the_per_model_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict] = []
    stub = SimpleNamespace(model_commands=SimpleNamespace(run=lambda **kw: calls.append(kw)))
    monkeypatch.setattr(lazy, "harness", lambda: stub)
    argv = _models_command(_steps())
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert len(calls) == 1
    # The whole corpus (no --model), stored: what `compat lookup` and /api/v1/models read the next morning.
    assert calls[0]["models"] in (None, []) and calls[0]["store"] is True


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_says_how_to_add_the_per_model_sweep(tmp_path: Path) -> None:
    """`make run` does not run the per-model sweep (its cost, bench/README.md): after its sweep, before serving, it
    prints the command that adds it. `make models` runs exactly that command."""
    stamp = tmp_path / "installed"
    stamp.touch()
    bin_dir = Path(sys.executable).parent
    dry = subprocess.run(["make", "--no-print-directory", "-n", "run", f"BIN={bin_dir}", f"STAMP={stamp}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    sweep = next(i for i, ln in enumerate(lines) if ln.startswith(f"{bin_dir}/compat sweep"))
    note = next(i for i, ln in enumerate(lines) if ln.startswith("echo") and "make models" in ln)
    serve = max(i for i, ln in enumerate(lines) if ln.startswith(f"{bin_dir}/compat serve"))
    assert sweep < note < serve
    assert "compat sweep --models" in lines[note]
    models = subprocess.run(["make", "--no-print-directory", "-n", "models", f"BIN={bin_dir}", f"STAMP={stamp}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert models.stdout.split() == [f"{bin_dir}/compat", "sweep", "--models"], models.stdout
