"""The service's CLI actions (``compat db upgrade``, ``compat token create``, ``compat runs reap``) as functions.

``worker/orchestration/cli.py`` wires them into the ``compat`` command (importing this module only when one runs).
"""

from __future__ import annotations

from service import db
from service.auth import create_token
from service.lifecycle import reap


def db_upgrade(database_url: str | None = None) -> str:
    """Migrate the database to the newest schema; returns the revision it is now at."""
    return db.upgrade(database_url)


def token_create(name: str, database_url: str | None = None) -> str:
    """Create an API token and return its secret (stored only as a hash: print it once)."""
    db.upgrade(database_url)
    with db.session_scope(database_url) as session:
        return create_token(session, name)


def runs_reap(database_url: str | None = None) -> list[tuple[str, str]]:
    """Mark runs whose owner is lost ``interrupted`` (``service.lifecycle.reap``); (run id, reason) of each."""
    db.upgrade(database_url)
    with db.session_scope(database_url) as session:
        return reap(session)
