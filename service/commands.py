"""The service's CLI actions (``compat db upgrade``, ``compat token create``, ``compat runs reap|list``) as functions.

``cli/app.py`` wires them into the ``compat`` command (importing this module only when one runs).
"""

from __future__ import annotations

from service import db
from service import schemas as S
from service.auth import create_token
from service.lifecycle import reap
from service.queries import list_runs


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


def runs_list(database_url: str | None = None, *, device: str | None = None, limit: int = 20,
              kind: str | None = None) -> S.RunPage:
    """The newest stored runs (``GET /api/v1/runs``'s read): state, scope, counts, start and end."""
    db.upgrade(database_url)
    with db.session_scope(database_url) as session:
        return list_runs(session, device=device, kind=kind, per_page=limit)
