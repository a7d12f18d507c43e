"""The service's CLI actions (``compat db upgrade``, ``compat token create``, ``compat serve``) as functions.

``worker/cli.py`` wires them into the ``compat`` command; each imports lazily so the CLI stays fast.
"""

from __future__ import annotations

from compat.settings import get_settings


def db_upgrade(database_url: str | None = None) -> str:
    """Migrate the database to the newest schema; returns the revision it is now at."""
    from service import db

    return db.upgrade(database_url)


def token_create(name: str, database_url: str | None = None) -> str:
    """Create an API token and return its secret (stored only as a hash: print it once)."""
    from service import db
    from service.auth import create_token

    db.upgrade(database_url)
    with db.session_scope(database_url) as session:
        return create_token(session, name)


def serve(host: str | None = None, port: int | None = None) -> None:
    """Run the API and dashboard with uvicorn (app factory ``service.app:create_app``)."""
    import uvicorn

    settings = get_settings()
    db_upgrade(settings.database_url)  # fail here, loudly, rather than on the first request
    uvicorn.run("service.app:create_app", factory=True, host=host or settings.host, port=port or settings.port,
                log_level="info")
