"""REST API over a seeded SQLite store: read endpoints, auth, submissions, badges, metrics, JSON errors."""

from __future__ import annotations

import html
import json

import pytest
from service_seed import seed, times

from compat.results import Status
from service import db
from service.models import ApiToken
from service.store import Store

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


@pytest.fixture
def runs(client, sqlite_url):
    store = Store(sqlite_url)
    t = times(2)
    a = seed(store, started=t[0])
    b = seed(store, started=t[1], failing={"MixtralForCausalLM": Status.UNSUPPORTED_OP})
    return a, b


def test_coverage_and_lists(client, runs) -> None:
    a, b = runs
    cov = client.get("/api/v1/coverage", params={"device": "neuron"}).json()["items"][0]
    assert (cov["run_id"], cov["supported"], cov["total"]) == (b, 3, 4)
    top = client.get("/api/v1/coverage", params={"top_n": 3}).json()["items"][0]
    assert (top["supported"], top["total"]) == (3, 3)
    page = client.get("/api/v1/architectures", params={"status": "unsupported_op", "check": "forward"}).json()
    assert [r["name"] for r in page["items"]] == ["MixtralForCausalLM"]
    assert client.get("/api/v1/architectures", params={"per_page": 2}).json()["total"] == 4
    d = client.get(f"/api/v1/diff?a={a}&b={b}").json()
    assert [e["architecture"] for e in d["regressions"]] == ["MixtralForCausalLM"]
    bl = client.get("/api/v1/blockers").json()["items"]
    assert bl[0]["op"] == "aten::histc" and bl[0]["count"] == 1 and bl[0]["variants"] == ["aten::histc (Long)"]
    assert bl[0]["unlocks"] is None  # no chain measured for the seeded run: only the first blocker is known
    runs_page = client.get("/api/v1/runs").json()
    assert [r["id"] for r in runs_page["items"]] == [b, a]
    detail = client.get(f"/api/v1/runs/{b}").json()
    assert detail["state"] == "complete" and len(detail["result_list"]) == 12
    arch = client.get("/api/v1/architectures/MixtralForCausalLM").json()
    assert arch["blocking_op"] == "aten::histc (Long)" and arch["supported"] == {"neuron": False}
    assert len(arch["history"]) == 2
    # issue 19: the verdict says where it stops, not only "not supported"
    assert arch["verdicts"]["neuron"].startswith("failing: ") and "aten::histc (Long)" in arch["verdicts"]["neuron"]
    llama = client.get("/api/v1/architectures/LlamaForCausalLM").json()["verdicts"]["neuron"]
    assert llama.startswith("supported"), llama
    page = client.get("/architectures/LlamaForCausalLM").text
    # The page shows the same line: under the pill, or as the pill itself when it is all there is to say.
    assert (f"<p class=\"small\" data-verdict>{html.escape(llama)}</p>" in page if llama != "supported natively"
            else '<span class="st-icon" aria-hidden="true">✓</span> supported natively</span>' in page)
    declared = client.get("/api/v1/coverage/declared", params={"top_n": 4}).json()
    labels = {r["name"]: r["label"] for r in declared["rows"]}
    assert labels["optimum-neuron 0.4.5"] == "declared, not measured"
    assert client.get("/api/v1/coverage/history", params={"device": "neuron"}).json()["points"][0]["run_id"] == a


def test_bad_input_is_json_422_or_404(client, runs) -> None:
    for url in ("/api/v1/architectures?bogus=1", "/api/v1/architectures?status=nope", "/api/v1/coverage?top_n=0",
                "/api/v1/architectures?per_page=100000", "/api/v1/runs?state=weird", "/api/v1/diff?a=x"):
        r = client.get(url)
        assert r.status_code == 422, url
        assert r.json()["error"]
    for url in ("/api/v1/runs/nope", "/api/v1/architectures/NoSuchArch", "/api/v1/submissions/999",
                "/api/v1/diff?a=nope&b=nope2", "/api/v1/nothing-here"):
        r = client.get(url)
        assert r.status_code == 404 and r.headers["content-type"].startswith("application/json"), url


def test_badge_states(client, runs) -> None:
    ok = client.get("/api/v1/badges/LlamaForCausalLM.svg")
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("image/svg+xml")
    assert "supported" in ok.text and "#2e7d32" in ok.text
    assert "unsupported" in client.get("/api/v1/badges/MixtralForCausalLM.svg").text
    assert "not tested" in client.get("/api/v1/badges/LlamaForCausalLM.svg?device=cuda").text
    unknown = client.get("/api/v1/badges/NoSuchArchForCausalLM.svg")  # issue 19: was a 200 "not tested" badge
    assert unknown.status_code == 404 and "not in the catalog" in unknown.json()["error"]


def test_submission_needs_token(client) -> None:
    r = client.post("/api/v1/submissions", data={"model_id": "meta-llama/Llama-3.2-1B"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    # Each 401 says how to get a token (issue 30: it did not mention `compat token create`).
    assert r.json()["error"].startswith("missing bearer token: ") and "`compat token create NAME`" in r.json()["error"]
    r = client.post("/api/v1/submissions", data={"model_id": "a/b"}, headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and r.json()["error"].startswith("invalid or revoked token: ")
    assert "`compat token create NAME`" in r.json()["error"]


def test_token_is_stored_hashed(client, token, sqlite_url) -> None:
    with db.session_scope(sqlite_url) as s:
        row = s.query(ApiToken).one()
        assert row.name == "tester" and token not in row.token_hash and len(row.token_hash) == 64


def test_submission_by_model_id_and_by_config(client, token) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    r = client.post("/api/v1/submissions", data={"model_id": "meta-llama/Llama-3.2-1B", "revision": "main"},
                    headers=auth)
    assert r.status_code == 202 and r.headers["location"] == r.json()["url"]
    got = client.get(r.json()["url"]).json()
    assert got["state"] == "queued" and got["model_id"] == "meta-llama/Llama-3.2-1B" and got["revision"] == "main"
    r = client.post("/api/v1/submissions", files={"config": ("config.json", json.dumps(LLAMA))}, headers=auth)
    assert r.status_code == 202
    got = client.get(r.json()["url"]).json()
    assert got["architecture"] == "LlamaForCausalLM"
    assert [sid for sid, _ in client.app.state.enqueued] == [1, 2]


@pytest.mark.parametrize(("data", "files", "field"), [
    ({"model_id": "bad--name"}, None, "model_id"),
    ({"model_id": "-lead/x"}, None, "model_id"),
    ({"model_id": "a/b", "revision": "../etc"}, None, "revision"),
    ({}, None, "model_id"),
    ({}, {"config": ("config.json", "not json")}, "config"),
    ({}, {"config": ("config.json", json.dumps({**LLAMA, "model_type": "fancy", "architectures": ["FancyLM"],
                                                 "auto_map": {"AutoModel": "x.Y"}}))}, "model_type"),
    ({}, {"config": ("config.json", json.dumps({**LLAMA, "vocab_size": 10**9}))}, "vocab_size"),
    ({}, {"config": ("config.json", json.dumps({**LLAMA, "num_hidden_layers": 200, "hidden_size": 65536}))},
     "hidden_size"),
    ({}, {"config": ("config.json", json.dumps({**LLAMA, "num_hidden_layers": 512}))}, "num_hidden_layers"),
])
def test_submission_refusals_name_the_field(client, token, data, files, field) -> None:
    r = client.post("/api/v1/submissions", data=data, files=files, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    if field == "model_type":
        assert "trust_remote_code" in r.json()["error"]


def test_upload_cap_in_bytes(app_factory, sqlite_url) -> None:
    from fastapi.testclient import TestClient

    from service.auth import create_token

    with TestClient(app_factory(max_upload_bytes=2048)) as c:
        with db.session_scope(sqlite_url) as s:
            tok = create_token(s, "cap")
        big = json.dumps({**LLAMA, "pad": "x" * 3000})
        r = c.post("/api/v1/submissions", files={"config": ("config.json", big)},
                   headers={"Authorization": f"Bearer {tok}"})
        assert r.status_code == 422 and r.json()["field"] == "config"
        huge = json.dumps({**LLAMA, "pad": "x" * 40_000})
        r = c.post("/api/v1/submissions", files={"config": ("config.json", huge)},
                   headers={"Authorization": f"Bearer {tok}"})
        assert r.status_code == 413 and r.json()["error"] == "request body too large"


def test_healthz_and_metrics(client) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "database": "ok"}
    client.get("/api/v1/coverage")
    text = client.get("/metrics").text
    assert 'compat_http_requests_total{method="GET",route="/api/v1/coverage",status="200"} 1.0' in text
