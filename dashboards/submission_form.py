"""The submission form's server side: the API's token check and ``service.submissions.create_submission`` (the
same rules as ``POST /api/v1/submissions``), errors turned into readable per-field messages for the page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session
from starlette.datastructures import FormData, UploadFile

from compat.settings import Settings
from service.auth import token_name
from service.submissions import (
    HubConfig,
    QueueFull,
    SubmissionInput,
    SubmissionRejected,
    create_submission,
    upload_read_size,
)
from service.validation import InvalidInput


@dataclass
class FormResult:
    """Either a created submission id, or the errors (field, message) and the values to refill the form with;
    ``retry_after_s`` when the queue was full (the page answers 429 with Retry-After)."""

    submission_id: int | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    retry_after_s: int | None = None


def _text(form: FormData, name: str) -> str:
    v = form.get(name)
    return v.strip() if isinstance(v, str) else ""


async def create_from_form(session: Session, form: FormData, settings: Settings,
                           enqueue: Callable[[int, str], None] | None, database_url: str,
                           hub_config: HubConfig | None = None) -> FormResult:
    """Validate the form; on success store a queued submission and hand it to ``enqueue`` (the app's hook). The
    token is checked first: without a valid one the config is never parsed or built."""
    model_id, revision = _text(form, "model_id"), _text(form, "revision")
    values = {"model_id": model_id, "revision": revision}
    upload = form.get("config")
    has_file = isinstance(upload, UploadFile) and bool(upload.filename)
    data = SubmissionInput(model_id=model_id or None, revision=revision or None,
                           config=await upload.read(upload_read_size(settings)) if has_file else None)
    who = token_name(session, _text(form, "token"))
    hook = (lambda sid: enqueue(sid, database_url)) if enqueue is not None else None
    try:
        # Blocking (DB, meta-device build): keep it off the event loop.
        sub = await run_in_threadpool(create_submission, session, data, submitter=who, settings=settings,
                                      enqueue=hook, hub_config=hub_config)
    except SubmissionRejected as exc:
        return FormResult(errors=[(e.field, _readable(e)) for e in exc.errors], values=values)
    except QueueFull as full:
        return FormResult(errors=[("queue", full.message[0].upper() + full.message[1:] + ".")], values=values,
                          retry_after_s=full.retry_after_s)
    return FormResult(submission_id=sub.id, values=values)


_LABELS = {"token": "API token", "model_id": "Model id", "revision": "Revision", "config": "config.json"}


def _readable(exc: InvalidInput) -> str:
    """'Model id: model id may contain only ...' reads better with the field named and capitalised once."""
    label = _LABELS.get(exc.field, exc.field)
    msg = exc.message
    if msg.lower().startswith(label.lower()):
        return msg[0].upper() + msg[1:] + "."
    return f"{label}: {msg}."
