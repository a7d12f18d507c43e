"""The nightly gate at the command line: a `compat sweep --broker` run that ends incomplete (a task lost with the
broker) fails `--fail-on-regression`, prints how many results are missing, and its JSON report carries the state.

The cluster is simulated at the executor: the real plan, store, finalize, report and gate run; the stand-in executor
stores every architecture but the last, as a broker that lost one queued task would leave it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import commands
from cli.app import app
from compat.results import ArchitectureEntry, ResultRecord, Status
from compat.settings import get_settings
from worker.catalog.catalog import Catalog, write_snapshot
from worker.orchestration import executors

ARCHS = ("LlamaForCausalLM", "GPT2LMHeadModel", "MistralForCausalLM")
runner = CliRunner()


class Cluster:
    """Stands in for CeleryExecutor: stores the results the workers would, losing the last ``lost`` tasks."""

    lost = 0

    def __init__(self, _app: object) -> None:
        pass

    def run(self, store, plan, on_progress=None):  # noqa: ANN001, ANN201
        run_id = executors.start(store, plan)
        for e in plan.entries[:len(plan.entries) - Cluster.lost]:
            store.add_results(run_id, [ResultRecord(architecture=e.name, rank=e.rank, device=plan.device, check=c,
                                                    status=Status.PASS) for c in plan.checks])
        return executors.finalize(store, run_id, plan.device, str(plan.run.trigger))


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    snapshot = tmp_path / "snapshot.json"
    write_snapshot(Catalog(source="hub", snapshot_id=None, entries=[
        ArchitectureEntry(name=n, model_type=n.lower(), rank=i) for i, n in enumerate(ARCHS, 1)]),
        snapshot, endpoint="test", limit=len(ARCHS))
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_CATALOG_SOURCE": "snapshot", "COMPAT_CATALOG_SNAPSHOT": str(snapshot),
                 "COMPAT_BROKER_URL": "redis://127.0.0.1:1/0", "COLUMNS": "200"}.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    monkeypatch.setattr(commands, "CeleryExecutor", Cluster)
    monkeypatch.setattr(commands, "make_app", lambda settings: None)
    yield tmp_path
    get_settings.cache_clear()


def _nightly(tmp: Path, lost: int) -> tuple[int, str, dict]:
    Cluster.lost = lost
    report = tmp / f"report-{lost}.json"
    res = runner.invoke(app, ["sweep", "--broker", "--device", "cpu", "--trigger", "nightly", "--baseline",
                              "last-nightly", "--fail-on-regression", "--json", str(report)])
    return res.exit_code, " ".join(res.output.split()), json.loads(report.read_text())


def test_an_incomplete_broker_run_fails_the_gate_and_says_how_much_is_missing(cluster: Path) -> None:
    code, out, report = _nightly(cluster, lost=0)
    assert code == 0, out
    assert (report["run"]["state"], report["run"]["missing"]) == ("complete", 0)

    code, out, report = _nightly(cluster, lost=1)
    run_id = report["run"]["id"]
    assert code == 1, out
    # No regression at all (every stored result passed): the run's state alone fails the gate.
    assert f"run {run_id} is incomplete: 4 of 12 planned result(s) missing" in out
    assert "0 regression(s)" in out
    assert (report["run"]["state"], report["run"]["missing"]) == ("incomplete", 4)
