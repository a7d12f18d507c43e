"""Issue 13's findings on the submission path, one test each: the token comes before any validation (API and form),
a model id and an upload that disagree are refused, NaN/Infinity survive the store (SQLite and PostgreSQL), a
submission never writes the catalog row and its run carries what was submitted, and the page shows the queue."""

from __future__ import annotations

import json
import math

import pytest
from fastapi.testclient import TestClient
from service_seed import ARCHS, make_run, rec

from compat.configjson import config_digest
from compat.results import ArchitectureEntry, Check, Provenance, Status, Trigger
from compat.settings import Settings
from service import db
from service import submissions as rules
from service.models import Architecture, Run, Submission
from service.store import Store
from service.submissions import SubmissionInput, SubmissionRejected, create_submission
from worker.catalog.corpus_models import CORPUS_DIR

CORPUS = CORPUS_DIR  # the cited config corpus, shipped as product data (issue 33)
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


@pytest.fixture
def session(sqlite_url: str):
    db.upgrade(sqlite_url)
    with db.session_scope(sqlite_url) as s:
        yield s


def _never(*_: object, **__: object) -> None:
    raise AssertionError("the config was validated for a caller without a valid token")


def test_no_token_means_no_config_validation(session, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Finding 4: the form ran the (expensive) validation before it checked the token.
    monkeypatch.setattr(rules, "check_config", _never)
    with pytest.raises(SubmissionRejected) as info:
        create_submission(session, SubmissionInput(config=json.dumps(LLAMA).encode(), model_id="bad--id"),
                          submitter=None, settings=Settings(database_url=sqlite_url))
    assert [e.field for e in info.value.errors] == ["token", "model_id"]


def test_the_form_checks_the_token_first(app_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "check_config", _never)
    with TestClient(app_factory()) as c:
        r = c.post("/submit", data={"token": "not-a-token"},
                   files={"config": ("config.json", json.dumps({**LLAMA, "num_hidden_layers": 255}))})
    assert r.status_code == 422 and "API token" in r.text


def _hub(config: dict | Exception):  # noqa: ANN202
    def fetch(model_id: str, revision: str | None) -> dict:
        if isinstance(config, Exception):
            raise config
        return config
    return fetch


@pytest.mark.parametrize(("hub", "field"), [
    ({**LLAMA, "model_type": "mistral", "architectures": ["MistralForCausalLM"]}, "model_type"),
    ({**LLAMA, "architectures": ["LlamaForCausalLM_v2"]}, "architectures"),
    (FileNotFoundError("404 Entry not found"), "model_id"),
    (ConnectionError("Hub unreachable"), "model_id"),
])
def test_model_id_and_upload_that_disagree_are_refused(session, sqlite_url: str, hub, field: str) -> None:
    # Finding 6: the id was taken on trust (and written as the catalog's representative).
    with pytest.raises(SubmissionRejected) as info:
        create_submission(session, SubmissionInput(model_id="meta-llama/Llama-3.2-1B",
                                                   config=json.dumps(LLAMA).encode()),
                          submitter="me", settings=Settings(database_url=sqlite_url), hub_config=_hub(hub))
    assert info.value.field == field, info.value.message


def test_model_id_and_upload_that_agree_are_stored_with_digest(session, sqlite_url: str) -> None:
    sub = create_submission(session, SubmissionInput(model_id="meta-llama/Llama-3.2-1B", revision="main",
                                                     config=json.dumps(LLAMA).encode()),
                            submitter="me", settings=Settings(database_url=sqlite_url), hub_config=_hub(LLAMA))
    row = session.get(Submission, sub.id)
    assert (row.model_id, row.revision, row.config_digest, row.notes) == (
        "meta-llama/Llama-3.2-1B", "main", config_digest(LLAMA), None)
    unchecked = create_submission(session, SubmissionInput(model_id="a/b", config=json.dumps(LLAMA).encode()),
                                  submitter="me", settings=Settings(database_url=sqlite_url))
    assert session.get(Submission, unchecked.id).notes == [
        "not checked against the Hub: this server cannot read a/b's config.json"]


def test_non_finite_config_survives_the_store(db_url: str) -> None:
    # Finding 2: [0.0, Infinity] came back [0.0, None]; PostgreSQL's json type refuses the bare token outright.
    store = Store(db_url)
    cfg = {**LLAMA, "time_step_limit": [0.0, math.inf], "x": math.nan}
    with db.session_scope(db_url) as s:
        sub = create_submission(s, SubmissionInput(config=json.dumps(cfg).encode()), submitter="me",
                                settings=Settings(database_url=db_url))
        sid = sub.id
    got = store.submission(sid)["config"]
    assert got["time_step_limit"] == [0.0, math.inf] and math.isnan(got["x"])
    run = make_run()
    store.start_run(run, ARCHS[:1], [("LlamaForCausalLM", "neuron", "load")])
    store.add_results(run.id, [rec("LlamaForCausalLM", Check.LOAD, Status.MISMATCH, metrics={"rmse": math.nan})])
    assert math.isnan(store.run_results(run.id)[0].metrics["rmse"])


def test_a_submission_run_never_writes_the_catalog_row(db_url: str) -> None:
    # Finding 6: a submission set the shared row to rank 1, downloads 0 and the sent model id.
    store = Store(db_url)
    sweep = make_run()
    store.start_run(sweep, ARCHS, [])
    mine = make_run(trigger=Trigger.SUBMISSION)
    mine.provenance = Provenance(submission_id=7, model_id="someone/fork", revision="v1", config_digest="ab" * 32)
    entry = ArchitectureEntry(name="Qwen2ForCausalLM", model_type="qwen2", rank=1, representative="someone/fork")
    store.start_run(mine, [entry], [(entry.name, "neuron", "load")])
    with db.session_scope(db_url) as s:
        row = s.get(Architecture, "Qwen2ForCausalLM")
        assert (row.rank, row.downloads, row.representative) == (2, 900, None)
        run = s.get(Run, mine.id)
        assert (run.submission_id, run.submitted_model_id, run.submitted_revision, run.config_digest) == (
            7, "someone/fork", "v1", "ab" * 32)


def test_submission_page_names_the_upload_and_shows_its_queue_position(client, token) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    phi = (CORPUS / "phi3_5_mini_instruct.json").read_text()
    ids = [client.post("/api/v1/submissions", files={"config": ("config.json", body)}, headers=auth).json()["id"]
           for body in (json.dumps(LLAMA), phi)]
    got = client.get(f"/api/v1/submissions/{ids[1]}").json()
    assert got["queue_position"] == 2 and got["model_type"] == "phi3" and got["architecture"] == "Phi3ForCausalLM"
    assert got["config_digest"] == config_digest(json.loads(phi))
    assert any(n.startswith("auto_map ignored: Phi3ForCausalLM") for n in got["notes"])  # finding 1
    page = client.get(f"/submissions/{ids[1]}").text
    assert "Queue position 2 (1 ahead)" in page and "uploaded config.json" in page and "Phi3ForCausalLM" in page
    assert "auto_map ignored" in page
    status = client.get(f"/submissions/{ids[0]}/status.json").json()
    assert status["queue_position"] == 1 and status["message"] == "Next in the queue."


def test_html_routes_bound_their_integers(client) -> None:
    # Finding 5: these raised OverflowError into SQLite (500).
    assert client.get("/submissions/99999999999999999999").status_code == 404
    assert client.get("/submissions/99999999999999999999/status.json").status_code == 404
    assert client.get("/submissions/0").status_code == 404
    assert client.get(f"/runs?page={10**30}").status_code == 200
    assert client.get(f"/matrix?page={10**30}").status_code == 200
    assert client.get(f"/?top={10**30}").status_code == 200
