"""service.submissions.create_submission, the rules both the API and the submit form apply: every refusal names
its field, a missing token is reported together with the first bad field, and a good input becomes a queued row."""

from __future__ import annotations

import json

import pytest

from compat.settings import Settings
from service import db
from service.models import Submission
from service.submissions import SubmissionInput, SubmissionRejected, create_submission, upload_read_size

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


@pytest.fixture
def session(sqlite_url: str):
    db.upgrade(sqlite_url)
    with db.session_scope(sqlite_url) as s:
        yield s


def test_config_becomes_a_queued_row_and_is_enqueued(session, sqlite_url: str) -> None:
    enqueued: list[int] = []
    sub = create_submission(session, SubmissionInput(config=json.dumps(LLAMA).encode()), submitter="me",
                            settings=Settings(database_url=sqlite_url), enqueue=enqueued.append)
    assert enqueued == [sub.id]
    row = session.get(Submission, sub.id)
    assert (row.state, row.architecture, row.token_name, row.config, row.model_id) == (
        "queued", "LlamaForCausalLM", "me", LLAMA, None)


def test_missing_token_and_bad_field_are_both_reported(session, sqlite_url: str) -> None:
    enqueued: list[int] = []
    with pytest.raises(SubmissionRejected) as info:
        create_submission(session, SubmissionInput(model_id="bad--name"), submitter=None,
                          settings=Settings(database_url=sqlite_url), enqueue=enqueued.append)
    assert [e.field for e in info.value.errors] == ["token", "model_id"]
    assert info.value.field == "token", "the first reason is what a single-error caller (the API) reports"
    assert enqueued == [] and session.query(Submission).count() == 0


@pytest.mark.parametrize(("data", "field"), [
    (SubmissionInput(), "model_id"),
    (SubmissionInput(model_id="a/b", revision="../etc"), "revision"),
    (SubmissionInput(config=b"not json"), "config"),
    # Remote code: a model_type the installed Transformers lacks, whatever its auto_map says.
    (SubmissionInput(config=json.dumps({**LLAMA, "model_type": "fancy", "architectures": ["FancyForCausalLM"],
                                        "auto_map": {"AutoModel": "x.Y"}}).encode()), "model_type"),
])
def test_each_refusal_names_its_field(session, sqlite_url: str, data: SubmissionInput, field: str) -> None:
    with pytest.raises(SubmissionRejected) as info:
        create_submission(session, data, submitter="me", settings=Settings(database_url=sqlite_url))
    assert [e.field for e in info.value.errors] == [field]


def test_upload_over_the_cap_is_refused_by_size(session, sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url, max_upload_bytes=1024)
    assert upload_read_size(settings) == 1025
    with pytest.raises(SubmissionRejected, match="exceeds the upload limit of 1024 bytes"):
        create_submission(session, SubmissionInput(config=b" " * 1025), submitter="me", settings=settings)
