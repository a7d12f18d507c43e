"""One status vocabulary and one "failing" for the API and the pages, and submissions kept apart from the catalog's
runs (issue 19): the matrix page and ``GET /api/v1/architectures`` accept the same words and find the same rows; a
reference failure is never "what blocks" an architecture; runs list sweeps and submissions apart."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from service_seed import ARCHS, make_run, rec, seed, times

from compat import status_filter
from compat.results import Check, ErrorInfo, Provenance, Status, Trigger
from service.store import Store


@pytest.fixture
def client(app_factory, sqlite_url: str) -> TestClient:
    store = Store(sqlite_url)
    t = times(5)
    seed(store, started=t[0], failing={"LlamaForCausalLM": Status.MISMATCH,
                                       "MixtralForCausalLM": Status.UNSUPPORTED_OP})
    # A newer selection run where Qwen2's reference failed: no verdict on the device, never "failing".
    run = make_run(started=t[1])
    run.scope = "selection"
    store.start_run(run, [a for a in ARCHS if a.name == "Qwen2ForCausalLM"], [])
    store.add_results(run.id, [rec("Qwen2ForCausalLM", c, Status.REFERENCE_FAIL, reason="reference: cpu nan",
                                   error=ErrorInfo(type="FloatingPointError", message="the CPU reference is NaN"))
                               for c in (Check.LOAD, Check.FORWARD, Check.GENERATE)])
    store.finish_run(run.id)
    for n in range(3):  # submissions of Llama's config that pass: its own kind of run, never the catalog's
        sub = make_run(trigger=Trigger.SUBMISSION, started=t[2 + n])
        sub.provenance = Provenance(submission_id=n + 1, model_id="org/llama-variant", config_digest="cd" * 32)
        store.start_run(sub, ARCHS[:1], [])
        store.add_results(sub.id, [rec("LlamaForCausalLM", c) for c in (Check.LOAD, Check.FORWARD, Check.GENERATE)])
        store.finish_run(sub.id)
    return TestClient(app_factory())


def _api_names(client: TestClient, **params: str) -> set[str]:
    res = client.get("/api/v1/architectures", params={"device": "neuron", "per_page": 500, **params})
    assert res.status_code == 200, res.text
    return {r["name"] for r in res.json()["items"]}


def _matrix_names(client: TestClient, **params: str) -> set[str]:
    res = client.get("/matrix", params={"device": "neuron", **params})
    assert res.status_code == 200
    return set(re.findall(r'href="/architectures/(\w+)"', res.text))


@pytest.mark.parametrize("word", [*status_filter.GROUPS, "mismatch", "unsupported_op", "pass"])
def test_the_api_and_the_matrix_accept_the_same_words_and_find_the_same_rows(client: TestClient, word: str) -> None:
    assert _api_names(client, status=word) == _matrix_names(client, status=word)


def test_the_words_mean_what_the_rules_say(client: TestClient) -> None:
    assert _api_names(client, status="failing") == {"LlamaForCausalLM", "MixtralForCausalLM"}
    assert _api_names(client, status="not_supported") == {"LlamaForCausalLM", "MixtralForCausalLM"}
    # The API's older spelling reads as not_supported, on both surfaces.
    assert _api_names(client, status="unsupported") == _matrix_names(client, status="unsupported") \
        == _api_names(client, status="not_supported")
    assert _api_names(client, status="failing", check="train") == set()
    bad = client.get("/api/v1/architectures", params={"status": "broken"})
    assert bad.status_code == 422
    with pytest.raises(ValueError, match="use one of: supported, not_supported, failing"):
        status_filter.normalise("broken")


def test_a_reference_failure_is_not_what_blocks_an_architecture(client: TestClient) -> None:
    qwen = client.get("/api/v1/architectures/Qwen2ForCausalLM").json()
    assert qwen["supported"] == {"neuron": False}
    assert qwen["error"] is None and qwen["blocking_op"] is None  # it says nothing about the device
    assert "What blocks it" not in client.get("/architectures/Qwen2ForCausalLM").text
    mixtral = client.get("/api/v1/architectures/MixtralForCausalLM").json()
    assert mixtral["error"] == "RuntimeError: MixtralForCausalLM forward failed"
    assert "What blocks it" in client.get("/architectures/MixtralForCausalLM").text


def test_submission_runs_are_listed_and_shown_apart(client: TestClient) -> None:
    llama = client.get("/api/v1/architectures/LlamaForCausalLM").json()
    assert llama["supported"] == {"neuron": False}  # the passing submissions do not change the catalog's verdict
    assert {h["kind"] for h in llama["history"]} == {"sweep"}
    assert [h["submission_id"] for h in llama["submitted"]] == [3, 2, 1]
    assert all(h["kind"] == "submission" and h["supported"] for h in llama["submitted"])
    page = client.get("/architectures/LlamaForCausalLM").text
    history = page.split("History across catalog sweeps")[1].split("Submitted configs")[0]
    assert "submission" not in history
    assert page.count('data-kind="submission"') == 3 and "org/llama-variant" in page

    every = client.get("/api/v1/runs").json()
    assert every["total"] == 5 and every["kinds"] == {"sweep": 2, "submission": 3}
    sweeps = client.get("/api/v1/runs", params={"kind": "sweep"}).json()
    assert sweeps["total"] == 2 and {r["kind"] for r in sweeps["items"]} == {"sweep"}
    subs = client.get("/api/v1/runs", params={"kind": "submission"}).json()
    assert [r["submission_id"] for r in subs["items"]] == [3, 2, 1]
    assert client.get("/api/v1/runs", params={"kind": "nightly"}).status_code == 422
    # The runs page opens on the sweeps, one tab from the submissions.
    html = client.get("/runs").text
    assert html.count("<tr data-run=") == 2 and "Submitted configs (3)" in html
    html = client.get("/runs?kind=submission").text
    assert html.count("<tr data-run=") == 3 and 'href="/submissions/2"' in html
