"""A Hub-id submission on a server that cannot reach the Hub fails with a message that says so and what to do, and
one log line (issue 30: "Name or service not known" and a 70-line traceback in the server log)."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime

import pytest
from huggingface_hub import constants

from service import db
from service.models import Submission
from service.store import Store
from worker.catalog.hub import HubError, fetch_config
from worker.orchestration.submissions import run_submission


def _closed_port() -> str:
    """A 127.0.0.1 endpoint nothing listens on (bound, then released): a refused connection, no network."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_an_unreachable_hub_is_a_hub_error_saying_what_to_do() -> None:
    endpoint = _closed_port()
    with pytest.raises(HubError) as exc:
        fetch_config("meta-llama/Llama-3.2-1B", endpoint=endpoint, timeout=5)
    msg = str(exc.value)
    assert msg.startswith(f"meta-llama/Llama-3.2-1B: cannot reach the Hub at {endpoint} to read its config.json")
    assert "upload the model's config.json instead" in msg


def test_an_offline_hub_id_submission_fails_clearly_with_one_log_line(sqlite_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", _closed_port())  # what HF_ENDPOINT sets
    Store(sqlite_url)
    with db.session_scope(sqlite_url) as s:
        now = datetime.now(UTC)
        sub = Submission(model_id="meta-llama/Llama-3.2-1B", state="queued", created=now, updated=now)
        s.add(sub)
        s.flush()
        sid = sub.id
    with caplog.at_level(logging.INFO):
        assert run_submission(sid, sqlite_url) == "failed"
    with db.session_scope(sqlite_url) as s:
        error = s.get(Submission, sid).error  # what GET /api/v1/submissions/{id} shows
    assert "cannot reach the Hub" in error and "upload the model's config.json" in error
    assert "Name or service not known" not in error
    mine = [r for r in caplog.records if r.name.startswith("worker.orchestration.submissions")]
    assert len(mine) == 1 and mine[0].exc_info is None, [r.getMessage() for r in mine]  # no traceback
    assert "cannot reach the Hub" in mine[0].getMessage()
