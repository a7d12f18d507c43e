"""Submissions end to end: API -> worker.orchestration.submissions (in-process, background thread) -> a
one-architecture run.

Uses the real sweep on the default device with a tiny Llama config (about 6 s); no network.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from service import db, queries, runs
from service.models import Submission
from service.store import Store
from worker.orchestration.submissions import run_submission

TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


def _add(url: str, config: dict) -> int:
    with db.session_scope(url) as s:
        now = datetime.now(UTC)
        sub = Submission(config=config, state="queued", created=now, updated=now)
        s.add(sub)
        s.flush()
        return sub.id


def test_submitted_config_becomes_a_one_architecture_run(sqlite_url: str) -> None:
    from cli.serve import create_app
    from compat.settings import Settings
    from service.auth import create_token

    app = create_app(Settings(database_url=sqlite_url))  # the deployed app: enqueue_submission, a background thread
    with db.session_scope(sqlite_url) as s:
        tok = create_token(s, "e2e")
    with TestClient(app) as c:
        r = c.post("/api/v1/submissions", files={"config": ("config.json", json.dumps(TINY_LLAMA))},
                   headers={"Authorization": f"Bearer {tok}"})
        assert r.status_code == 202
        deadline = time.monotonic() + 400  # a hang guard only: a loaded machine may take minutes
        while (got := c.get(r.json()["url"]).json())["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, got
            time.sleep(0.5)
    assert got["state"] == "done", got
    assert got["run_id"] and {x["architecture"] for x in got["results"]} == {"LlamaForCausalLM"}
    assert {x["check"] for x in got["results"]} == {"load", "forward", "generate", "train"}
    store = Store(sqlite_url)
    # A submission run is a run of its own trigger, and never becomes a device's headline.
    with store.session() as s:
        assert queries.list_runs(s, trigger="submission").items[0].id == got["run_id"]
        assert runs.latest_run(s, "neuron") is None
        assert runs.latest_run(s, "neuron", trigger="submission") is None


@pytest.mark.parametrize(("config", "reason"), [
    # Remote code (a model_type Transformers lacks): every check skipped, so no device verdict, so failed.
    ({**TINY_LLAMA, "model_type": "fancy", "architectures": ["FancyForCausalLM"],
      "auto_map": {"AutoModelForCausalLM": "m.X"}}, "remote code: model_type 'fancy' is not native"),
    ({"model_type": "llama"}, "architectures"),
])
def test_bad_submission_fails_with_reason(sqlite_url: str, config: dict, reason: str) -> None:
    Store(sqlite_url)
    sid = _add(sqlite_url, config)
    assert run_submission(sid, sqlite_url) == "failed"
    sub = Store(sqlite_url).submission(sid)
    assert sub["state"] == "failed"
    with db.session_scope(sqlite_url) as s:
        assert reason in s.get(Submission, sid).error
    # Running it again does nothing: only queued submissions start.
    assert run_submission(sid, sqlite_url) == "failed"
