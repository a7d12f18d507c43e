"""Creating a submission: the one place the rules for a new submission live (verified token, Hub model id, revision,
uploaded config.json) and the queued row it becomes, shared by ``POST /api/v1/submissions`` and the submit form."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from compat.settings import Settings
from service.models import Submission
from service.validation import InvalidInput, check_config, parse_config, validate_repo_id, validate_revision

TOKEN_MESSAGE = "API token missing or not valid: create one with `compat token create NAME`"


@dataclass(frozen=True)
class SubmissionInput:
    """What was submitted: a Hub model id (+revision) and/or the raw bytes of an uploaded config.json."""

    model_id: str | None = None
    revision: str | None = None
    # As read from the upload: callers read at most ``upload_read_size(settings)`` bytes, so an oversized file is
    # seen as too big without reading all of it.
    config: bytes | None = None


class SubmissionRejected(InvalidInput):
    """Every reason a submission was refused (token first, then the first bad field). ``field`` and ``message`` are
    the first reason's, so anything handling ``InvalidInput`` (the API's 422) handles this unchanged."""

    def __init__(self, errors: list[InvalidInput]) -> None:
        super().__init__(errors[0].field, errors[0].message)
        self.errors = errors


def upload_read_size(settings: Settings) -> int:
    """Bytes to read from an upload: one past the cap, which is enough to tell that it is over the cap."""
    return settings.max_upload_bytes + 1


def _validated(data: SubmissionInput, settings: Settings) -> tuple[dict[str, Any] | None, str | None]:
    """(parsed config or None, its architecture or None); raises ``InvalidInput`` naming the first bad field."""
    if data.model_id is not None:
        validate_repo_id(data.model_id)
    if data.revision is not None:
        validate_revision(data.revision)
    if data.config is not None:
        limit = settings.max_upload_bytes
        if len(data.config) > limit:
            raise InvalidInput("config", f"config.json exceeds the upload limit of {limit} bytes")
        cfg = parse_config(data.config, limit)
        architecture, _ = check_config(cfg, settings.max_submission_params)
        return cfg, architecture
    if data.model_id is None:
        raise InvalidInput("model_id", "give a Hub model id or upload a config.json")
    return None, None


def create_submission(session: Session, data: SubmissionInput, *, submitter: str | None, settings: Settings,
                      enqueue: Callable[[int], None] | None = None) -> Submission:
    """Validate ``data``, store it as a queued submission by ``submitter`` (the verified token's name; None when the
    token check failed) and hand its id to ``enqueue``. Raises ``SubmissionRejected`` instead when anything is wrong.

    Blocking (database, and building the model on torch's meta device to count parameters): async callers run it in
    a thread."""
    errors: list[InvalidInput] = [] if submitter is not None else [InvalidInput("token", TOKEN_MESSAGE)]
    cfg = architecture = None
    try:
        cfg, architecture = _validated(data, settings)
    except InvalidInput as exc:
        errors.append(exc)
    if errors:
        raise SubmissionRejected(errors)
    now = datetime.now(UTC)
    sub = Submission(model_id=data.model_id, revision=data.revision, config=cfg, architecture=architecture,
                     state="queued", token_name=submitter, created=now, updated=now)
    session.add(sub)
    session.commit()
    if enqueue is not None:
        enqueue(sub.id)
    return sub
