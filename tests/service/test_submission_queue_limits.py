"""A bounded submission queue (issue 19): past ``COMPAT_MAX_QUEUED_SUBMISSIONS`` (all callers) or
``COMPAT_MAX_QUEUED_PER_TOKEN`` (one token), counting queued and running submissions, the API and the form answer 429
with Retry-After and the limit hit; the token is checked before the queue, the queue before the config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from service_seed import make_run

from compat.results import Trigger
from service import db
from service.auth import create_token
from service.models import Run, Submission
from service.store import Store
from service.submissions import DEFAULT_RUN_S


@pytest.fixture
def make_client(app_factory):  # noqa: ANN001, ANN201
    clients: list[TestClient] = []

    def make(**limits: int) -> TestClient:
        c = TestClient(app_factory(**limits))
        c.__enter__()
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def _post(c: TestClient, tok: str, model_id: str = "org/model", **kw):  # noqa: ANN202
    return c.post("/api/v1/submissions", data={"model_id": model_id}, headers={"Authorization": f"Bearer {tok}"},
                  **kw)


def _token(url: str, name: str) -> str:
    with db.session_scope(url) as s:
        return create_token(s, name)


def test_one_token_past_its_share_gets_429_with_retry_after(make_client, sqlite_url: str) -> None:  # noqa: ANN001
    c = make_client(max_queued_per_token=2, max_queued_submissions=10)
    mine, other = _token(sqlite_url, "mine"), _token(sqlite_url, "other")
    assert [_post(c, mine).status_code for _ in range(2)] == [202, 202]
    r = _post(c, mine)
    assert r.status_code == 429, r.text
    assert "COMPAT_MAX_QUEUED_PER_TOKEN=2" in r.json()["error"] and r.json()["detail"]["limit"] == 2
    # No run has finished to measure: one default run's time until this token's oldest submission has run.
    assert int(r.headers["Retry-After"]) == DEFAULT_RUN_S >= 1
    assert _post(c, other).status_code == 202  # another token still has its share
    with db.session_scope(sqlite_url) as s:  # a submission that ended frees its place
        s.query(Submission).filter(Submission.token_name == "mine").first().state = "done"
    assert _post(c, mine).status_code == 202


def test_a_full_queue_gets_429_naming_the_limit_and_retry_after_from_measured_runs(
        make_client, sqlite_url: str) -> None:  # noqa: ANN001
    c = make_client(max_queued_per_token=5, max_queued_submissions=3, submission_workers=1)
    toks = [_token(sqlite_url, f"t{i}") for i in range(4)]
    store = Store(sqlite_url)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i, seconds in enumerate((80, 120)):  # two finished submission runs: 100 s each on average
        run = make_run("cpu", trigger=Trigger.SUBMISSION, started=start + timedelta(hours=i))
        store.start_run(run, [], [])
        with db.session_scope(sqlite_url) as s:
            row = s.get(Run, run.id)
            row.state, row.finished = "complete", row.started + timedelta(seconds=seconds)
    assert [_post(c, t).status_code for t in toks[:3]] == [202, 202, 202]
    with db.session_scope(sqlite_url) as s:
        s.query(Submission).order_by(Submission.id).first().state = "running"  # running still holds a place
    r = _post(c, toks[3])
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["error"].startswith("the submission queue is full: 3 submission(s) queued or running")
    assert "COMPAT_MAX_QUEUED_SUBMISSIONS=3" in body["error"] and body["detail"]["setting"] == "max_queued_submissions"
    assert r.headers["Retry-After"] == "100"  # the first one's end makes room: one measured run


def test_the_token_is_checked_before_the_queue_and_the_queue_before_the_config(make_client, sqlite_url: str
                                                                                ) -> None:  # noqa: ANN001
    c = make_client(max_queued_per_token=1)
    tok = _token(sqlite_url, "me")
    assert _post(c, tok).status_code == 202
    assert _post(c, "compat_not-a-token").status_code == 401  # no token: never told about the queue
    # A config that would fail validation (not JSON) is not even read: the full queue answers first.
    r = c.post("/api/v1/submissions", files={"config": ("config.json", b"{not json")},
               headers={"Authorization": f"Bearer {tok}"})
    assert r.status_code == 429 and "Retry-After" in r.headers


def test_the_submit_form_answers_429_with_retry_after(make_client, sqlite_url: str) -> None:  # noqa: ANN001
    c = make_client(max_queued_per_token=1)
    tok = _token(sqlite_url, "me")
    form = {"model_id": "org/model", "token": tok}
    assert c.post("/submit", data=form, follow_redirects=False).status_code == 303
    page = c.post("/submit", data=form, follow_redirects=False)
    assert page.status_code == 429 and int(page.headers["Retry-After"]) >= 1
    assert "COMPAT_MAX_QUEUED_PER_TOKEN=1" in page.text and 'value="org/model"' in page.text
    # Without a valid token the form says so, not that the queue is full.
    bad = c.post("/submit", data={**form, "token": "nope"}, follow_redirects=False)
    assert bad.status_code == 422 and "COMPAT_MAX_QUEUED" not in bad.text
