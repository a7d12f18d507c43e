"""The submission form rejects bad input with readable messages, accepts a good id with a token, and the
submission page follows the submission's state as the worker moves it (polling, no reload by the user)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from compat.results import (
    DEFAULT_CHECKS,
    ArchitectureEntry,
    Check,
    DeviceInfo,
    ResultRecord,
    RunInfo,
    Status,
    Trigger,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def token(database_url: str) -> str:
    from service import db
    from service.auth import create_token

    with db.session_scope(database_url) as s:
        return create_token(s, "dashboard-tests")


def _fill(page, model_id: str, token: str) -> None:  # noqa: ANN001
    page.page.get_by_label("Hub model id").fill(model_id)
    page.page.get_by_label("API token").fill(token)
    with page.page.expect_navigation():
        page.page.get_by_role("button", name="Submit").click()


def test_bad_id_is_rejected_with_a_readable_message(page, token: str) -> None:  # noqa: ANN001
    page.goto("/submit")
    _fill(page, "../../etc/passwd", token)
    alert = page.page.get_by_role("alert")
    assert "not accepted" in alert.inner_text()
    assert alert.locator('[data-field="model_id"]').inner_text() == (
        "Model id is 'name' or 'namespace/name'.")
    assert page.page.get_by_label("Hub model id").get_attribute("aria-invalid") == "true"
    assert page.page.get_by_label("Hub model id").input_value() == "../../etc/passwd", "the input is kept"
    assert page.page.get_by_label("API token").input_value() == "", "the token is never echoed back"
    page.shot("submit-rejected")


def test_missing_or_wrong_token_is_rejected(page) -> None:  # noqa: ANN001
    page.goto("/submit")
    _fill(page, "openai-community/gpt2", "compat_not-a-real-token")
    assert page.page.get_by_role("alert").locator('[data-field="token"]').inner_text().startswith(
        "API token missing or not valid")
    assert page.page.locator("h1").inner_text() == "Submit a model"


def test_good_id_is_accepted_and_the_page_follows_the_state(page, token: str, live, database_url: str
                                                          ) -> None:  # noqa: ANN001
    from service import db
    from service.models import Submission
    from service.store import Store

    page.goto("/submit")
    _fill(page, "openai-community/gpt2", token)
    assert page.page.url.startswith(page.base + "/submissions/")
    sub_id = int(page.page.url.rsplit("/", 1)[1])
    assert live.app.state.enqueue_submission.calls[-1] == (sub_id, database_url)
    assert page.page.locator("#sub-state").inner_text() == "queued"
    page.shot("submission-queued")

    def move(state: str, **fields: object) -> None:  # what the worker does through the store
        with db.session_scope(database_url) as s:
            sub = s.get(Submission, sub_id)
            sub.state, sub.updated = state, datetime.now(UTC)
            for k, v in fields.items():
                setattr(sub, k, v)

    move("running")
    page.page.wait_for_function("document.querySelector('#sub-state').textContent === 'running'", timeout=10_000)
    # The worker's one-architecture run, written through the store like any run.
    store = Store(database_url)
    entry = ArchitectureEntry(name="GPT2LMHeadModel", model_type="gpt2", rank=4, representative="openai-community/gpt2")
    run = RunInfo(trigger=Trigger.SUBMISSION, device=DeviceInfo(name="neuron", simulated=True))
    store.start_run(run, [entry], [(entry.name, "neuron", str(c)) for c in DEFAULT_CHECKS])
    store.add_results(run.id, [ResultRecord(architecture=entry.name, rank=4, device="neuron", check=c,
                                            status=Status.PASS if c != Check.TRAIN else Status.OOM)
                               for c in DEFAULT_CHECKS])
    store.finish_run(run.id)
    move("done", architecture="GPT2LMHeadModel", run_id=run.id)
    # A final state reloads the page once, which then lists the run's results.
    page.page.wait_for_selector("#sub-status[data-state='done']", timeout=10_000)
    page.page.wait_for_selector("table tbody tr", timeout=10_000)
    assert page.page.locator("#sub-state").inner_text() == "done"
    api = page.page.request.get(page.base + f"/api/v1/submissions/{sub_id}").json()
    assert api["state"] == "done"
    assert page.page.locator("table tbody tr").count() == len(api["results"]) == len(DEFAULT_CHECKS)
    assert page.page.locator('tbody .st[data-status="oom"]').count() == 1
    page.shot("submission-done")
