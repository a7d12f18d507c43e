"""The profile and strict mode in the device's identity (issue 32 item 4): runs, headlines, baselines, history and
the gate are per ``neuron (<profile>[, strict])``. A legacy-xla sweep of MixtralForCausalLM followed by a default trn2
sweep with ``--baseline last --fail-on-regression`` reports no regression against the other profile; a strict run
never baselines against a fallback run.

Real `compat sweep` commands on the simulated neuron device (the profile chosen in-process, as ``NEURON_PROFILE``
chooses it at import), with a stand-in runner (no model is built): the verdicts come from the plan.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_runner import write_plan
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli.app import app
from cli.console import console
from cli.serve import create_app
from compat.results import ArchitectureEntry
from compat.settings import get_settings
from service.store import Store
from worker.catalog.catalog import Catalog, write_snapshot

MIXTRAL, LLAMA = "MixtralForCausalLM", "LlamaForCausalLM"
SORT = "aten::sort (Int)"
FAILS_ON_SORT = {MIXTRAL: {c: ["unsupported_op", SORT] for c in ("forward", "generate", "train")}}
runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    nb = pytest.importorskip("neuron_backend")
    snapshot = tmp_path / "snapshot.json"
    write_snapshot(Catalog(source="hub", snapshot_id=None, entries=[
        ArchitectureEntry(name=n, model_type=n.lower(), rank=i) for i, n in enumerate((LLAMA, MIXTRAL), 1)]),
        snapshot, endpoint="test", limit=2)
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_CATALOG_SOURCE": "snapshot", "COMPAT_CATALOG_SNAPSHOT": str(snapshot),
                 "COMPAT_RUN_HOOK": "fake_runner:run", "FAKE_RUNNER_PLAN": str(tmp_path / "plan.json"),
                 "COMPAT_DEVICE": "neuron", "NEURON_CPU_FALLBACK": "1", "COLUMNS": "200"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(console, "width", 200)
    get_settings.cache_clear()
    yield tmp_path
    nb.set_profile("trn2")
    nb.set_strict(False)
    get_settings.cache_clear()


def _sweep(tmp: Path, monkeypatch: pytest.MonkeyPatch, profile: str, plan: dict, *args: str,
           strict: bool = False) -> tuple[int, str, str]:
    import neuron_backend as nb

    monkeypatch.setenv("NEURON_PROFILE", profile)  # what the CLI checks; the device reads it at import, so also:
    nb.set_profile(profile)
    nb.set_strict(strict)
    write_plan(tmp / "plan.json", tmp / "markers", plan)
    report = tmp / "report.json"
    res = runner.invoke(app, ["sweep", "--jobs", "0", "--no-decisions", "--json", str(report),
                              *(["--strict"] if strict else []), *args])
    return res.exit_code, " ".join(res.output.split()), json.loads(report.read_text())["run"]["id"]


def test_runs_baselines_and_headlines_are_per_profile_and_strict(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, legacy = _sweep(env, monkeypatch, "legacy-xla", {})
    assert code == 0 and f"run {legacy} on neuron (legacy-xla)" in out, out
    # The acceptance of issue 32: no regression against the other profile, and the gate passes.
    code, out, trn2 = _sweep(env, monkeypatch, "trn2", FAILS_ON_SORT, "--baseline", "last", "--fail-on-regression")
    assert code == 0, out
    assert f"run {trn2} on neuron (trn2)" in out
    assert f"run {trn2} vs baseline (none): 0 regression(s)" in out
    # A strict run never baselines against a fallback run, though one of its profile exists.
    code, out, strict = _sweep(env, monkeypatch, "trn2", FAILS_ON_SORT, "--baseline", "last", strict=True)
    assert code == 0 and f"run {strict} on neuron (trn2, strict)" in out, out
    assert f"run {strict} vs baseline (none)" in out
    # The next default trn2 run is compared with the trn2 fallback run, not the strict one nor legacy-xla.
    code, out, again = _sweep(env, monkeypatch, "trn2", {}, "--baseline", "last")
    assert f"run {again} vs baseline {trn2}: 0 regression(s) in 0 architecture(s), 3 fix(es)" in out, out

    store = Store()
    assert store.baseline_run_id(again) == trn2 and store.baseline_run_id(strict) is None
    with TestClient(create_app(get_settings())) as client:
        devices = {d["name"]: d for d in client.get("/api/v1/devices").json()}
        assert set(devices) == {"neuron (legacy-xla)", "neuron (trn2)", "neuron (trn2, strict)"}
        assert devices["neuron (trn2, strict)"]["strict"] and devices["neuron (legacy-xla)"]["profile"] == "legacy-xla"
        assert devices["neuron (trn2)"]["last_run_id"] == again and devices["neuron (legacy-xla)"]["device"] == "neuron"
        # A plain name is its default profile with the fallback on; never whichever profile ran last.
        head = client.get("/api/v1/coverage", params={"device": "neuron"}).json()["items"]
        assert [(c["device"], c["run_id"], c["profile"], c["strict"]) for c in head] == [
            ("neuron (trn2)", again, "trn2", False)]
        other = client.get("/api/v1/coverage", params={"device": "neuron (legacy-xla)"}).json()["items"]
        assert [(c["run_id"], c["supported"]) for c in other] == [(legacy, 2)]
        history = client.get("/api/v1/coverage/history", params={"device": "neuron (trn2)"}).json()
        assert [p["run_id"] for p in history["points"]] == [trn2, again]
        runs = client.get("/api/v1/runs", params={"device": "neuron (trn2, strict)"}).json()["items"]
        assert [r["id"] for r in runs] == [strict] and runs[0]["determinants"]["mode"] == "strict"
        assert client.get("/api/v1/coverage", params={"device": "neuron (trn3)"}).status_code == 404
        page = client.get("/").text
        assert "neuron (legacy-xla)" in page and "neuron (trn2, strict)" in page
    listed = runner.invoke(app, ["runs", "list", "--device", "neuron (legacy-xla)"]).output
    assert legacy in listed and trn2 not in listed
    shown = " ".join(runner.invoke(app, ["show", MIXTRAL]).output.split())
    assert "neuron (legacy-xla)" in shown and "neuron (trn2, strict)" in shown

