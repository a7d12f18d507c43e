"""`compat runs list` (issue 19: `--resume` asked for a run id the CLI could not list): the stored runs, newest first,
with state, scope and counts, read as `GET /api/v1/runs` reads them."""

from __future__ import annotations

from pathlib import Path

from test_one_truth import FIRST, _cli, _sweep, store_env  # noqa: F401 - store_env is the fixture used below
from typer.testing import CliRunner

from cli.app import app
from compat.results import (
    ArchitectureEntry,
    Check,
    DeviceInfo,
    Provenance,
    ResultRecord,
    RunInfo,
    Status,
    Trigger,
)
from compat.settings import get_settings
from service.store import Store


def test_runs_list_shows_the_stored_runs_newest_first(store_env: Path) -> None:  # noqa: F811
    assert "no sweep runs in" in _cli("runs", "list")
    _sweep(store_env, FIRST)
    _sweep(store_env, {}, "--arch", "GPT2LMHeadModel")
    lines = [ln for ln in _cli("runs", "list").splitlines() if " supported " in ln]
    assert len(lines) == 2
    assert "selection" in lines[0] and "1/1 supported" in lines[0]  # the newer run (one architecture) first
    assert "full" in lines[1] and "complete" in lines[1] and "4/5 supported" in lines[1]
    assert " ago" in lines[0] and "cpu" in lines[0] and "nightly" in lines[0]
    only = _cli("runs", "list", "--limit", "1")
    assert "1 of 2 sweep run(s)" in only
    res = _cli_fail("runs", "list", "--device", "tpu")
    assert "tpu" in res


def test_runs_list_keeps_submission_runs_apart(store_env: Path) -> None:  # noqa: F811
    """Issue 19: submissions are their own kind of run; a list of sweeps says how many it leaves out."""
    _sweep(store_env, FIRST)
    store = Store(get_settings().database_url)
    for n in (7, 8):
        run = RunInfo(trigger=Trigger.SUBMISSION, device=DeviceInfo(name="cpu"), catalog_source="submission",
                      provenance=Provenance(submission_id=n, config_digest="ab" * 32))
        store.start_run(run, [ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1)], [])
        store.add_results(run.id, [ResultRecord(architecture="LlamaForCausalLM", rank=1, device="cpu",
                                                check=Check.LOAD, status=Status.PASS)])
        store.finish_run(run.id)
    sweeps = _cli("runs", "list")
    assert len([ln for ln in sweeps.splitlines() if " supported " in ln]) == 1
    assert "1 of 1 sweep run(s); 2 submission run(s) not listed: --kind submission" in " ".join(sweeps.split())
    subs = [ln for ln in _cli("runs", "list", "--kind", "submission").splitlines() if " supported " in ln]
    assert len(subs) == 2 and "#8" in subs[0] and "#7" in subs[1] and all("submission" in ln for ln in subs)
    assert len([ln for ln in _cli("runs", "list", "--kind", "all").splitlines() if " supported " in ln]) == 3
    assert "--kind 'nope'" in _cli_fail("runs", "list", "--kind", "nope")


def _cli_fail(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code != 0
    return res.output


def test_runs_list_names_the_store_and_creates_none(store_env: Path) -> None:  # noqa: F811
    out = " ".join(_cli("runs", "list").split())
    assert f"no sweep runs in sqlite:///{store_env / 'compat.db'} (no store there yet)" in out
    assert not (store_env / "compat.db").exists()
