"""Everyday friction of the command line (issue 30, item 7), each as a fresh user met it: the sweep's help at 80
columns, a bad ``NEURON_SWITCHES``, an unknown ``--resume`` run, the checks' wording, "1 architectures"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

from cli import validate
from cli.app import app
from cli.tables import coverage_table
from compat.results import DEFAULT_CHECKS, DeviceInfo, ResultRecord, RunInfo
from service.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _compat(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``compat ARGS`` in a fresh process (not a terminal), with a private store and COLUMNS=80."""
    base = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "COLUMNS": "80",
            "COMPAT_VAR_DIR": str(tmp / "var"), "COMPAT_DATABASE_URL": f"sqlite:///{tmp / 'compat.db'}"}
    base.pop("NEURON_SWITCHES", None)
    return subprocess.run([sys.executable, "-m", "cli.app", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**base, **env}, stdin=subprocess.DEVNULL, timeout=120)


def test_sweep_help_at_80_columns_names_every_option_whole_and_lists_switches_and_default_checks(tmp_path):
    done = _compat(tmp_path, "sweep", "--help")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "…" not in out  # rich's boxed help cut "--fail-on-regres…" and "NEURON_CPU_FALL…"
    assert all(len(line) <= 80 for line in out.splitlines()), [ln for ln in out.splitlines() if len(ln) > 80]
    words = set(out.replace(",", " ").split())
    sweep = typer.main.get_command(app).commands["sweep"]  # every option the command has, from Click itself
    names = [o for p in sweep.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    assert "--fail-on-regression" in names and len(names) > 15
    assert [n for n in names if n not in words] == []
    assert "NEURON_CPU_FALLBACK=0" in out
    # The default checks and every decision switch of the active profile, with its options.
    assert f"{', '.join(str(c) for c in DEFAULT_CHECKS)} (a supported" in out
    switches = validate.switch_table()
    assert len(switches) >= 4
    for sw in switches:
        assert sw["id"] in words and f"{sw['default']} (default)" in out, sw["id"]


def test_a_bad_neuron_switches_is_one_line_naming_the_variable(tmp_path):
    done = _compat(tmp_path, "sweep", "--arch", "LlamaForCausalLM", NEURON_SWITCHES="bogus=1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # was a 167-line traceback blaming trn2.json
    assert lines[0].startswith("error: NEURON_SWITCHES=bogus=1: unknown switch 'bogus'; valid switches: ")
    assert "integer_sort_topk" in lines[0] and "trn2.json" not in lines[0] and done.stdout == ""
    bad_option = _compat(tmp_path, "sweep", "--arch", "LlamaForCausalLM",
                         NEURON_SWITCHES="integer_sort_topk=maybe")
    assert bad_option.returncode == 2 and bad_option.stderr.strip() == (
        "error: NEURON_SWITCHES=integer_sort_topk=maybe: switch 'integer_sort_topk' has no option 'maybe'; "
        "options: fails, runs")


def test_an_unknown_resume_run_points_to_compat_runs_list(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'compat.db'}")
    run = RunInfo(device=DeviceInfo(name="cpu"))
    store.start_run(run, [], [])
    store.finish_run(run.id)
    done = _compat(tmp_path, "sweep", "--resume", "deadbeef")
    assert done.returncode == 2
    assert "unknown run id 'deadbeef'" in done.stderr and "`compat runs list --kind all`" in done.stderr
    assert "/api/v1/runs" not in done.stderr


def test_an_unknown_check_says_what_all_and_default_mean(tmp_path):
    done = _compat(tmp_path, "sweep", "--device", "cpu", "--checks", "frward")
    assert done.returncode == 2
    assert "(or all, default)" not in done.stderr  # read as if all were the default
    assert "or all (every check), or default (load, forward, generate, train)" in done.stderr


def test_one_architecture_is_not_1_architectures():
    records = [ResultRecord(architecture="LlamaForCausalLM", device="cpu", check=c, status="pass")
               for c in DEFAULT_CHECKS]
    caption = coverage_table(records, catalog=["LlamaForCausalLM"]).caption
    assert caption.startswith("1 architecture: 1 supported natively"), caption
