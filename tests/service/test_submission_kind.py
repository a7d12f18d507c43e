"""Submission runs are their own kind of run (issue 19): scope ``submission`` on the run (set by the sweep; migration
0009 for runs stored before), a label naming what was submitted, and still never a device's latest or headline run.

The run goes through the real sweep (``run_submission`` -> ``run_sweep``, in-process) with a stand-in runner that
passes every check (``COMPAT_RUN_HOOK=passing_runner:passing``): what is under test is the run's kind.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from service_seed import insert_bare_run, migrate
from sqlalchemy import text
from submission_row import queued_submission

from compat.results import Provenance, Scope, scope_label
from compat.settings import Settings, get_settings
from service import db, runs
from service.app import create_app
from service.models import Run, Submission
from worker.orchestration.submissions import run_submission

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}
DIGEST = "0123456789abcdef" * 4




@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch, sqlite_url: str):  # noqa: ANN201
    monkeypatch.setenv("COMPAT_RUN_HOOK", "passing_runner:passing")
    monkeypatch.setenv("COMPAT_DEVICE", "cpu")
    monkeypatch.setenv("COMPAT_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    yield sqlite_url
    get_settings.cache_clear()




def test_a_submission_run_is_stored_and_listed_as_a_submission(hooked: str) -> None:
    sid = queued_submission(hooked, model_id="org/tiny", revision="v1", config=TINY)
    assert run_submission(sid, hooked, jobs=0) == "done"
    with db.session_scope(hooked) as s:
        run = s.get(Run, s.get(Submission, sid).run_id)
        assert (run.trigger, run.scope) == ("submission", "submission")  # was ("submission", "full")
        assert runs.latest_run(s, "cpu") is None and runs.latest_run(s, "cpu", scope=None) is None
        run_id = run.id
    with TestClient(create_app(Settings(database_url=hooked))) as c:
        item = c.get("/api/v1/runs", params={"kind": "submission"}).json()["items"][0]
        assert item["id"] == run_id and item["scope"] == "submission"
        assert item["scope_label"].startswith("submission") and "registry" not in item["scope_label"]
        cov = c.get("/api/v1/coverage", params={"run_id": run_id}).json()
        assert [d["scope_label"][:len("submission")] for d in cov["items"]] == ["submission"], cov


@pytest.mark.parametrize(("prov", "label"), [
    (Provenance(submission_id=12, model_id="org/model", revision="rev1", config_digest=DIGEST),
     "submission #12: org/model@rev1 (config sha256 0123456789ab…)"),
    (Provenance(submission_id=3, config_digest=DIGEST), "submission #3: uploaded config.json (config sha256 "
                                                        "0123456789ab…)"),
    (Provenance(submission_id=4, model_id="org/model"), "submission #4: org/model"),
    (None, "submission: one submitted config, not the headline"),
])
def test_the_scope_label_names_the_submission(prov: Provenance | None, label: str) -> None:
    assert scope_label("submission", None, Scope.SUBMISSION, 1, prov) == label
    # The catalog scopes read as before, with or without provenance.
    assert scope_label("registry", None, Scope.FULL, 181) == "unranked: Transformers' registry, alphabetical"


def test_migration_0009_marks_stored_submission_runs_and_their_reproducers(db_url: str) -> None:
    migrate(db_url, "0008")
    insert_bare_run(db_url, "sub")
    sweep = ("INSERT INTO runs (id, trigger, device, catalog_source, versions, checks, device_info, started, state, "
             "planned_count) VALUES ('sweep', 'manual', 'neuron', 'x', '{}', '[]', '{}', '2026-01-02', 'complete', 0)")
    result = ("INSERT INTO results (run_id, architecture, device, \"check\", status, metrics, fallback_ops, "
              "has_fallback, duration_s, repro) VALUES (:run, 'LlamaForCausalLM', 'neuron', 'forward', 'mismatch', "
              "'{}', '[]', false, 0, :repro)")
    catalog_repro = "compat repro LlamaForCausalLM --device neuron --check forward"
    with db.get_engine(db_url).begin() as conn:
        conn.execute(text(sweep))
        conn.execute(text("UPDATE runs SET trigger = 'submission', submission_id = 7 WHERE id = 'sub'"))
        conn.execute(text(result), {"run": "sub", "repro": catalog_repro})
        conn.execute(text(result), {"run": "sweep", "repro": catalog_repro})

    def state() -> dict[str, tuple[str, str]]:
        with db.get_engine(db_url).connect() as conn:
            return {rid: (scope, repro) for rid, scope, repro in conn.execute(text(
                "SELECT runs.id, runs.scope, results.repro FROM runs JOIN results ON results.run_id = runs.id"))}

    assert state() == {"sub": ("full", catalog_repro), "sweep": ("full", catalog_repro)}
    migrate(db_url, "0009")
    assert state() == {"sub": ("submission", "compat repro --submission 7 --device neuron --check forward"),
                       "sweep": ("full", catalog_repro)}
    migrate(db_url, "0008", "downgrade")
    assert state() == {"sub": ("full", catalog_repro), "sweep": ("full", catalog_repro)}
    migrate(db_url, "head")
    assert db.current_revision(db_url) == db.head_revision()
