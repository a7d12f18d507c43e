"""A verdict on every submission (issue 30 item 5): the API item and the submission page say supported natively,
supported with CPU fallback (naming the ops) or failing (naming the first blocker), by the same rule as the
architecture's verdict (service.queries.verdict_of over compat.results.arch_verdict and compat.verdict_text).

Real submissions through the real sweep on the default device (the simulated neuron, trn2): a tiny Llama (greedy
generate runs aten::argmax on the CPU fallback) and a tiny Mixtral (its MoE routing sorts integer expert ids,
which trn2 refuses); no network.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from compat.settings import Settings
from compat.verdict_text import verdict_text
from dashboards.views import mount_pages
from service import db, queries
from service.app import create_app
from service.models import Submission
from service.store import Store
from worker.orchestration.submissions import run_submission

BASE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000}
LLAMA = {**BASE, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}
MIXTRAL = {**BASE, "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "num_local_experts": 4,
           "num_experts_per_tok": 2}


def _submit(url: str, config: dict) -> int:
    Store(url)  # migrations
    with db.session_scope(url) as s:
        now = datetime.now(UTC)
        sub = Submission(config=config, state="queued", created=now, updated=now)
        s.add(sub)
        s.flush()
        sid = sub.id
    assert run_submission(sid, url, jobs=0) == "done"
    return sid


@pytest.mark.parametrize(("config", "word", "pill", "names"), [
    (LLAMA, "supported_with_fallback", "supported with CPU fallback", "aten::argmax"),
    (MIXTRAL, "failing", "failing", "aten::sort (Int)"),
])
def test_a_submission_has_the_verdict_of_its_architectures_rule(sqlite_url: str, config: dict, word: str,
                                                                pill: str, names: str) -> None:
    sid = _submit(sqlite_url, config)
    app = create_app(Settings(database_url=sqlite_url), enqueue_submission=lambda *_: None, pages=mount_pages)
    with TestClient(app) as c:
        item = c.get(f"/api/v1/submissions/{sid}").json()
        page = c.get(f"/submissions/{sid}").text
    verdict = item["verdict"]
    assert verdict["device"] == "neuron" and verdict["word"] == word, verdict
    with db.session_scope(sqlite_url) as s:
        records = queries.get_submission(s, sid).results
    # The same line the architecture page shows for these records, from the one rule.
    assert verdict["text"] == verdict_text(records)
    if word == "failing":
        assert verdict["blocking_op"] == names and verdict["text"].endswith(f"at {names}")
        assert verdict["fallback_ops"] == [op for r in records if r.check in ("load", "forward", "generate")
                                           for op in r.fallback_ops]
    else:
        assert verdict["blocking_op"] is None
        assert any(op.startswith(names) for op in verdict["fallback_ops"]) and names in verdict["text"]
        # The page no longer shows generate as a plain pass: the fallback op is on it.
        assert "CPU fallback: aten::argmax" in page
    assert f'data-verdict="{word}"' in page and pill in page


def test_no_verdict_before_the_run(sqlite_url: str) -> None:
    Store(sqlite_url)
    with db.session_scope(sqlite_url) as s:
        now = datetime.now(UTC)
        sub = Submission(config=LLAMA, state="queued", created=now, updated=now)
        s.add(sub)
        s.flush()
        assert queries.get_submission(s, sub.id).verdict is None
