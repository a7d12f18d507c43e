"""API tokens: creation (secret shown once), sha256-hashed storage, and the bearer check for write endpoints.

Only the hash is stored, so reading the database never yields a usable token.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import ApiToken

TOKEN_PREFIX = "compat_"


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_token(session: Session, name: str) -> str:
    """Create a token named ``name`` and return its secret (the only time it is visible)."""
    if not name or len(name) > 64:
        raise ValueError("token name must be 1-64 characters")
    if session.scalar(select(ApiToken.id).where(ApiToken.name == name)) is not None:
        raise ValueError(f"a token named {name!r} already exists")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(name=name, token_hash=hash_token(secret), created=datetime.now(UTC), revoked=False))
    session.flush()
    return secret


def token_name(session: Session, secret: str) -> str | None:
    """Name of the live token with this secret, else None."""
    if not secret or len(secret) > 256:
        return None
    return session.scalar(select(ApiToken.name).where(ApiToken.token_hash == hash_token(secret),
                                                      ApiToken.revoked.is_(False)))
