"""Creating a submission: the one place the rules for a new submission live (verified token, Hub model id, revision,
uploaded config.json) and the queued row it becomes, shared by ``POST /api/v1/submissions`` and the submit form.

Order: the token first (nothing is parsed or built for a caller without one), then room in the queue (``QueueFull``:
the whole queue and each token's share are bounded), then the id and revision, then the config
(``service.validation.check_config``: caps, rules, Transformers, meta build), then, when both a Hub id and a config
are sent, that they name the same model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from compat.configjson import config_digest
from compat.settings import Settings
from compat.states import ACTIVE_STATES, SubmissionState
from service.models import Run, Submission
from service.runs import IS_SUBMISSION
from service.validation import InvalidInput, check_config, parse_config, validate_repo_id, validate_revision

# The note a submission of a Hub id gets when its run fetched (and kept) the config: what tells a kept Hub config from
# an upload (``uploaded``).
HUB_CONFIG_NOTE = "config.json read from the Hub at run time, kept for `compat repro --submission`"
TOKEN_MESSAGE = "API token missing or not valid: create one with `compat token create NAME`"
# (model id, revision or None) -> that repo's config.json; raises when the Hub has none or cannot be reached.
HubConfig = Callable[[str, str | None], dict[str, Any]]


@dataclass(frozen=True)
class SubmissionInput:
    """What was submitted: a Hub model id (+revision) and/or the raw bytes of an uploaded config.json."""

    model_id: str | None = None
    revision: str | None = None
    # As read from the upload: callers read at most ``upload_read_size(settings)`` bytes, so an oversized file is
    # seen as too big without reading all of it.
    config: bytes | None = None


# One submission run's seconds until a few have finished to measure it: a tiny model's four checks took ~6 s on an
# idle 2-core machine and up to a minute beside a sweep (tests/cli/test_submissions.py).
DEFAULT_RUN_S = 60.0
MEASURED_RUNS = 10  # the newest finished submission runs whose mean duration is the estimate


class QueueFull(Exception):
    """No room for another submission: the whole queue, or the caller's token's share, is at its limit (the setting
    and its value named). The API and the form answer 429 with ``Retry-After: retry_after_s``."""

    def __init__(self, setting: str, limit: int, retry_after_s: int) -> None:
        self.setting, self.limit, self.retry_after_s = setting, limit, retry_after_s
        who = "the submission queue is full:" if setting == "max_queued_submissions" else "this API token has"
        self.message = (f"{who} {limit} submission(s) queued or running, the limit (COMPAT_{setting.upper()}={limit}); "
                        f"retry in about {retry_after_s} s")
        super().__init__(self.message)


def _run_seconds(session: Session) -> float:
    """Mean duration of the newest finished submission runs, else ``DEFAULT_RUN_S``."""
    rows = session.execute(select(Run.started, Run.finished).where(
        IS_SUBMISSION, Run.finished.is_not(None)).order_by(Run.started.desc()).limit(MEASURED_RUNS))
    spans = [(end - start).total_seconds() for start, end in rows
             if start is not None and end is not None and start.tzinfo == end.tzinfo]
    spans = [s for s in spans if s > 0]
    return sum(spans) / len(spans) if spans else DEFAULT_RUN_S


def check_queue_room(session: Session, submitter: str, settings: Settings) -> None:
    """Raise ``QueueFull`` when ``submitter`` may not queue another submission now. Retry-After: until the queued
    or running submission whose end makes room has ended (its place in the FIFO queue x one run's time, divided
    among the workers that drain it)."""
    active = list(session.scalars(select(Submission.token_name).where(Submission.state.in_(ACTIVE_STATES))
                                  .order_by(Submission.id)))
    mine = [i for i, who in enumerate(active, 1) if who == submitter]
    # frees: the place in the queue of the submission whose end makes room (the first to end, or this token's).
    if len(active) >= (limit := settings.max_queued_submissions):
        setting, frees = "max_queued_submissions", len(active) - limit + 1
    elif len(mine) >= (limit := settings.max_queued_per_token):
        setting, frees = "max_queued_per_token", mine[len(mine) - limit]
    else:
        return
    waves = math.ceil(frees / max(1, settings.submission_workers))
    raise QueueFull(setting, limit, max(1, math.ceil(waves * _run_seconds(session))))


class SubmissionRejected(InvalidInput):
    """Every reason a submission was refused (token first, then the first bad field). ``field`` and ``message`` are
    the first reason's, so anything handling ``InvalidInput`` (the API's 422) handles this unchanged."""

    def __init__(self, errors: list[InvalidInput]) -> None:
        super().__init__(errors[0].field, errors[0].message)
        self.errors = errors


def uploaded(sub: Submission) -> bool:
    """Whether the submitter uploaded the config (alone or beside a Hub id), as opposed to one the run read from the
    Hub and kept."""
    return sub.config is not None and HUB_CONFIG_NOTE not in (sub.notes or [])


def upload_read_size(settings: Settings) -> int:
    """Bytes to read from an upload: one past the cap, which is enough to tell that it is over the cap."""
    return settings.max_upload_bytes + 1


@dataclass
class Validated:
    config: dict[str, Any] | None = None
    architecture: str | None = None
    digest: str | None = None
    notes: list[str] = field(default_factory=list)


def _agrees_with_hub(cfg: dict[str, Any], model_id: str, revision: str | None, hub_config: HubConfig | None
                     ) -> list[str]:
    """Refuse an upload that is not the config of the Hub repo it names (another model_type or class); returns
    notes. Without a way to read the Hub (an app made without ``hub_config``) the pair is noted as unchecked."""
    if hub_config is None:
        return [f"not checked against the Hub: this server cannot read {model_id}'s config.json"]
    try:
        hub = hub_config(model_id, revision)
    except Exception as exc:  # noqa: BLE001 - not found, offline, bad JSON: the id cannot be confirmed
        raise InvalidInput("model_id", f"cannot read config.json of {model_id}"
                                       f"{'@' + revision if revision else ''} from the Hub to check it matches the "
                                       f"upload: {type(exc).__name__}: {str(exc)[:200]}") from None
    for name in ("model_type", "architectures"):
        ours, theirs = cfg.get(name), hub.get(name)
        if name == "architectures":
            ours, theirs = (v[0] if isinstance(v, list) and v else v for v in (ours, theirs))
        if theirs is not None and ours != theirs:
            raise InvalidInput(name, f"the uploaded config has {name} {ours!r} but {model_id} on the Hub has "
                                     f"{theirs!r}: send the repo's own config, or no model_id")
    return []


def _validated(data: SubmissionInput, settings: Settings, hub_config: HubConfig | None) -> Validated:
    """The checked input; raises ``InvalidInput`` naming the first bad field."""
    if data.model_id is not None:
        validate_repo_id(data.model_id)
    if data.revision is not None:
        validate_revision(data.revision)
    if data.config is not None:
        limit = settings.max_upload_bytes
        if len(data.config) > limit:
            raise InvalidInput("config", f"config.json exceeds the upload limit of {limit} bytes")
        cfg = parse_config(data.config, limit)
        checked = check_config(cfg, settings.max_submission_params, timeout_s=settings.validation_timeout_s)
        notes = list(checked.notes)
        if data.model_id is not None:
            notes += _agrees_with_hub(cfg, data.model_id, data.revision, hub_config)
        return Validated(cfg, checked.architecture, config_digest(cfg), notes)
    if data.model_id is None:
        raise InvalidInput("model_id", "give a Hub model id or upload a config.json")
    return Validated()


def create_submission(session: Session, data: SubmissionInput, *, submitter: str | None, settings: Settings,
                      enqueue: Callable[[int], None] | None = None,
                      hub_config: HubConfig | None = None) -> Submission:
    """Validate ``data``, store it as a queued submission by ``submitter`` (the verified token's name; None when the
    token check failed) and hand its id to ``enqueue``. Raises ``SubmissionRejected`` instead when anything is wrong,
    ``QueueFull`` when the queue has no room for it.

    The token comes first: without a valid one only the cheap syntax checks run (so the form can still say which
    field is wrong), never the config's validation. Blocking (database, meta-device build, Hub read): async callers
    run it in a thread."""
    if submitter is None:
        errors: list[InvalidInput] = [InvalidInput("token", TOKEN_MESSAGE)]
        try:
            _syntax_only(data, settings)
        except InvalidInput as exc:
            errors.append(exc)
        raise SubmissionRejected(errors)
    check_queue_room(session, submitter, settings)  # before the config's validation: refusing costs two counts
    try:
        checked = _validated(data, settings, hub_config)
    except InvalidInput as exc:
        raise SubmissionRejected([exc]) from None
    now = datetime.now(UTC)
    sub = Submission(model_id=data.model_id, revision=data.revision, config=checked.config,
                     architecture=checked.architecture, config_digest=checked.digest, notes=checked.notes or None,
                     state=SubmissionState.QUEUED.value, token_name=submitter, created=now, updated=now)
    session.add(sub)
    session.commit()
    if enqueue is not None:
        enqueue(sub.id)
    return sub


def _syntax_only(data: SubmissionInput, settings: Settings) -> None:
    """The checks that cost nothing (id, revision, upload size): all an unauthenticated caller gets."""
    if data.model_id is not None:
        validate_repo_id(data.model_id)
    if data.revision is not None:
        validate_revision(data.revision)
    if data.config is not None and len(data.config) > settings.max_upload_bytes:
        raise InvalidInput("config", f"config.json exceeds the upload limit of {settings.max_upload_bytes} bytes")
    if data.config is None and data.model_id is None:
        raise InvalidInput("model_id", "give a Hub model id or upload a config.json")
