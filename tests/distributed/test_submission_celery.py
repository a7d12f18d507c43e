"""A submission (POST /submissions) on a cluster: enqueue_submission sends a Celery task when a broker is set,
and a worker runs it to `done` with the real sweep. Slow (a real tiny model in a worker): run with -m slow."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from compat.settings import get_settings

TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


@pytest.mark.slow
def test_submission_runs_on_a_worker(shared_redis, pg_url, store, make_cluster, monkeypatch):
    from service import db
    from service.models import Submission
    from worker.orchestration.submissions import enqueue_submission

    cluster = make_cluster(shared_redis, pg_url, run_hook="", arch_timeout_s=120.0, visibility_timeout_s=300.0)
    cluster.start_worker("w1")
    cluster.wait_ready()
    with db.session_scope(pg_url) as s:
        now = datetime.now(UTC)
        sub = Submission(config=TINY_LLAMA, state="queued", created=now, updated=now)
        s.add(sub)
        s.flush()
        sid = sub.id
    for key, value in cluster.env().items():
        if key.startswith("COMPAT_"):
            monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    try:
        enqueue_submission(sid, pg_url)  # returns at once: the work is on the cluster
        deadline = time.monotonic() + 400  # a hang guard only: a loaded machine may take minutes
        while (got := store.submission(sid))["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, cluster.log("w1")[-3000:]
            time.sleep(0.5)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert got["state"] == "done", (got, cluster.log("w1")[-3000:])
    assert {r.check for r in store.run_results(got["run_id"])} == {"load", "forward", "generate", "train"}
    assert "compat.run_submission" in cluster.log("w1")
