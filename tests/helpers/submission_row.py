"""A queued submission row stored straight in a test's store (no API, no validation): for tests of what running a
submission does, where how it was submitted is not under test."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from service import db
from service.models import Submission


def queued_submission(url: str, **fields: Any) -> int:
    """Store a queued submission with ``fields`` (model_id, config, config_digest...) in ``url``; its id."""
    db.upgrade(url)
    with db.session_scope(url) as s:
        now = datetime.now(UTC)
        sub = Submission(state="queued", created=now, updated=now, **fields)
        s.add(sub)
        s.flush()
        return sub.id
