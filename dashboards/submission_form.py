"""The submission form's server side: the same token check and input validation as ``POST /api/v1/submissions``
(``service.auth``, ``service.validation``), errors turned into readable per-field messages for the page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session
from starlette.datastructures import FormData, UploadFile

from compat.settings import Settings
from service.auth import token_name
from service.models import Submission
from service.validation import InvalidInput, check_config, parse_config, validate_repo_id, validate_revision


@dataclass
class FormResult:
    """Either a created submission id, or the errors (field, message) and the values to refill the form with."""

    submission_id: int | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)


def _text(form: FormData, name: str) -> str:
    v = form.get(name)
    return v.strip() if isinstance(v, str) else ""


async def create_from_form(session: Session, form: FormData, settings: Settings,
                           enqueue: Callable[[int, str], None] | None, database_url: str) -> FormResult:
    """Validate the form; on success store a queued submission and hand it to ``enqueue`` (the app's hook)."""
    model_id, revision = _text(form, "model_id"), _text(form, "revision")
    values = {"model_id": model_id, "revision": revision}
    upload = form.get("config")
    has_file = isinstance(upload, UploadFile) and bool(upload.filename)
    errors: list[tuple[str, str]] = []

    who = token_name(session, _text(form, "token"))
    if who is None:
        errors.append(("token", "API token missing or not valid: create one with `compat token create NAME`."))
    cfg = architecture = None
    try:
        if model_id:
            validate_repo_id(model_id)
        if revision:
            validate_revision(revision)
        if has_file:
            data = await upload.read(settings.max_upload_bytes + 1)
            cfg = parse_config(data, settings.max_upload_bytes)
            # Building on the meta device is CPU work: keep it off the event loop.
            architecture, _ = await run_in_threadpool(check_config, cfg, settings.max_submission_params)
        elif not model_id:
            raise InvalidInput("model_id", "give a Hub model id or upload a config.json")
    except InvalidInput as exc:
        errors.append((exc.field, _readable(exc)))
    if errors:
        return FormResult(errors=errors, values=values)

    now = datetime.now(UTC)
    sub = Submission(model_id=model_id or None, revision=revision or None, config=cfg, architecture=architecture,
                     state="queued", token_name=who, created=now, updated=now)
    session.add(sub)
    session.commit()
    if enqueue is not None:
        enqueue(sub.id, database_url)
    return FormResult(submission_id=sub.id, values=values)


_LABELS = {"model_id": "Model id", "revision": "Revision", "config": "config.json"}


def _readable(exc: InvalidInput) -> str:
    """'Model id: model id may contain only ...' reads better with the field named and capitalised once."""
    label = _LABELS.get(exc.field, exc.field)
    msg = exc.message
    if msg.lower().startswith(label.lower()):
        return msg[0].upper() + msg[1:] + "."
    return f"{label}: {msg}."
