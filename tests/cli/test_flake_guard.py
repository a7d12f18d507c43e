"""The flake guard (issue 34 item 1): before a regression counts, each regressed (architecture, check) runs again
in a fresh process. A pass there is ``flaky`` (stored, shown, counted, never gated on); the gate fails only on
regressions the re-run confirmed; both runs are kept and linked.

Real `compat sweep` commands with the pool (``--jobs 1``: spawned worker processes) and a stand-in runner
(``fake_runner``) whose ``once`` failure passes on its next execution: the injected flake.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fake_runner import write_plan
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli import commands
from cli.app import app
from cli.console import console
from cli.serve import create_app
from compat.results import ResultRecord, Status
from compat.settings import get_settings
from service import queries
from service.store import Store
from worker.orchestration import executors

LLAMA, GPT2 = "LlamaForCausalLM", "GPT2LMHeadModel"
SORT = "aten::sort (Int)"
runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_RUN_HOOK": "fake_runner:run", "FAKE_RUNNER_PLAN": str(tmp_path / "plan.json"),
                 "COLUMNS": "200"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(console, "width", 200)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _sweep(tmp: Path, markers: str, plan: dict, *args: str) -> tuple[int, str, str]:
    write_plan(tmp / "plan.json", tmp / markers, plan)
    report = tmp / f"{markers}.json"
    res = runner.invoke(app, ["sweep", "--device", "cpu", "--jobs", "1", "--source", "registry", "--arch", LLAMA,
                              "--arch", GPT2, "--json", str(report), *args])
    return res.exit_code, res.output, json.loads(report.read_text())["run"]["id"]


def _pids(markers: Path, arch: str) -> set[str]:
    return {p.read_text() for p in markers.glob(f"{arch}.*")}


def test_a_failure_that_passes_on_its_rerun_is_flaky_and_only_confirmed_regressions_fail_the_gate(env: Path) -> None:
    code, out, base = _sweep(env, "m1", {})
    assert code == 0, out
    # Llama's forward fails on its first execution only (the flake); GPT2's generate fails every time.
    code, out, run = _sweep(env, "m2", {LLAMA: {"once": {"forward": ["mismatch", None]}},
                                        GPT2: {"generate": ["unsupported_op", SORT]}},
                            "--baseline", "last", "--fail-on-regression")
    assert code == 1, out
    lines = out.splitlines()
    assert f"run {run} vs baseline {base}: 1 regression(s) in 1 architecture(s)" in out
    assert f"flaky      {LLAMA} [cpu] forward: pass -> mismatch  [re-run: pass]" in lines
    assert f"REGRESSION {GPT2} [cpu] generate: pass -> unsupported_op  ({SORT})  [re-run: unsupported_op]" in lines
    assert any(ln.startswith(f"signature  1 x unsupported_op [{SORT}]") for ln in lines)
    assert not any(LLAMA in ln for ln in lines if ln.startswith("signature"))  # a flake is no new failure

    # Both runs kept and linked; the re-run ran each architecture in a fresh process of its own.
    store = Store()
    rerun = store.rerun_id(run)
    assert rerun is not None and f"(re-run {rerun})" in out
    again = {(r.architecture, str(r.check)): str(r.status) for r in store.run_results(rerun)}
    assert again == {(LLAMA, "load"): "pass", (LLAMA, "forward"): "pass", (GPT2, "load"): "pass",
                     (GPT2, "generate"): "unsupported_op"}
    first = {(r.architecture, str(r.check)): str(r.status) for r in store.run_results(run)}
    assert first[(LLAMA, "forward")] == "mismatch"  # the original result stays as it was
    m2 = env / "m2"
    llama, gpt2 = _pids(m2, LLAMA), _pids(m2, GPT2)
    shared = llama & gpt2  # the sweep's one worker (--jobs 1) ran both the first time
    assert len(llama) == 2 and len(gpt2) == 2 and len(shared) == 1
    assert (llama - shared) != (gpt2 - shared)  # each re-run in a fresh process of its own

    # The API's diff and the run diff page say the same; the re-run is not a headline or a baseline.
    with store.session() as s:
        d = queries.diff_runs(s, base, run)
        assert (d.regressed_checks, d.flaky_checks, d.rerun) == (1, 1, rerun)
        assert [e.architecture for e in d.regressions] == [GPT2]
        assert [f["architecture"] for f in d.flaky] == [LLAMA]
        assert d.signatures[0]["op"] == SORT and d.signatures[0]["architectures"] == [GPT2]
        listed = {r.id: r for r in queries.list_runs(s).items}
        assert listed[rerun].rerun_of == run and listed[run].rerun == rerun
        assert store.baseline_run_id(run) == base
    with TestClient(create_app(get_settings())) as client:
        page = client.get(f"/runs/diff?a={base}&b={run}")
        assert page.status_code == 200
        assert re.search(r'<h2 id="flaky">Flaky <span class="pill">1</span>', page.text)
        assert f'href="/runs/{rerun}"' in page.text and "data-signature" in page.text
        linked = client.get(f"/runs/{rerun}").text
        assert "data-rerun-of" in linked and f'href="/runs/{run}"' in linked
        assert f'href="/runs/{rerun}"' in client.get(f"/runs/{run}").text
        api = client.get(f"/api/v1/diff?a={base}&b={run}")
        assert api.status_code == 200 and api.json()["flaky_checks"] == 1
        assert api.json()["regressed"][0]["rerun"] == "unsupported_op"
    runs_list = runner.invoke(app, ["runs", "list"]).output
    assert f"re-run of {run}" in runs_list


def test_flaky_alone_passes_the_gate(env: Path) -> None:
    code, out, base = _sweep(env, "m1", {})
    code, out, run = _sweep(env, "m2", {LLAMA: {"once": {"forward": ["mismatch", None]}}},
                            "--baseline", base, "--fail-on-regression")
    assert code == 0, out
    assert "0 regression(s)" in out and "1 flaky" in out


class Cluster:
    """Stands in for CeleryExecutor (as in test_gate.py): stores what the workers would. The original run's
    GPT2 generate fails; on the flake guard's re-run (a plan whose run is ``rerun_of`` another) it passes."""

    plans: list = []

    def __init__(self, _app: object) -> None:
        pass

    def run(self, store, plan, on_progress=None):  # noqa: ANN001, ANN201
        Cluster.plans.append(plan)
        run_id = executors.start(store, plan)
        fail = plan.run.rerun_of is None and len(Cluster.plans) > 1
        store.add_results(run_id, [ResultRecord(
            architecture=e.name, rank=e.rank, device=plan.device, check=c,
            status=Status.UNSUPPORTED_OP if fail and (e.name, str(c)) == (GPT2, "generate") else Status.PASS)
            for e in plan.entries for c in plan.checks])
        return executors.finalize(store, run_id, plan.device, str(plan.run.trigger))


def test_on_the_broker_the_rerun_is_a_linked_run_of_tasks(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPAT_BROKER_URL", "redis://127.0.0.1:1/0")
    get_settings.cache_clear()
    monkeypatch.setattr(commands, "CeleryExecutor", Cluster)
    monkeypatch.setattr(commands, "make_app", lambda settings: None)
    Cluster.plans = []
    args = ["sweep", "--broker", "--device", "cpu", "--source", "registry", "--arch", LLAMA, "--arch", GPT2,
            "--trigger", "nightly", "--baseline", "last-nightly", "--fail-on-regression"]
    assert runner.invoke(app, args).exit_code == 0
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    rerun_plan = Cluster.plans[-1]
    original = Cluster.plans[-2].run.id
    assert rerun_plan.run.rerun_of is not None and [e.name for e in rerun_plan.entries] == [GPT2]
    assert [str(c) for c in rerun_plan.checks] == ["load", "generate"] and str(rerun_plan.run.scope) == "selection"
    assert f"flaky      {GPT2} [cpu] generate: pass -> unsupported_op  [re-run: pass]" in res.output.splitlines()
    assert Store().rerun_id(rerun_plan.run.rerun_of) == rerun_plan.run.id and rerun_plan.run.rerun_of == original
