"""`compat runs list` (issue 19: `--resume` asked for a run id the CLI could not list): the stored runs, newest first,
with state, scope and counts, read as `GET /api/v1/runs` reads them."""

from __future__ import annotations

from pathlib import Path

from test_one_truth import FIRST, _cli, _sweep, store_env  # noqa: F401 - store_env is the fixture used below
from typer.testing import CliRunner

from cli.app import app


def test_runs_list_shows_the_stored_runs_newest_first(store_env: Path) -> None:  # noqa: F811
    assert "no runs in" in _cli("runs", "list")
    _sweep(store_env, FIRST)
    _sweep(store_env, {}, "--arch", "GPT2LMHeadModel")
    lines = [ln for ln in _cli("runs", "list").splitlines() if " supported " in ln]
    assert len(lines) == 2
    assert "selection" in lines[0] and "1/1 supported" in lines[0]  # the newer run (one architecture) first
    assert "full" in lines[1] and "complete" in lines[1] and "4/5 supported" in lines[1]
    assert " ago" in lines[0] and "cpu" in lines[0] and "nightly" in lines[0]
    only = _cli("runs", "list", "--limit", "1")
    assert "1 of 2 run(s)" in only
    res = _cli_fail("runs", "list", "--device", "tpu")
    assert "tpu" in res


def _cli_fail(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code != 0
    return res.output
