"""The SQLite file a database URL names, for reads that must never create a store (``compat show``, ``lookup``).

SQLAlchemy's URL parser alone: no store, no Alembic, no torch, so the light commands can ask it.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError


def sqlite_file(url: str) -> Path | None:
    """The file of an SQLite URL; None for a server database, an in-memory or ``file:`` URI database, or a URL
    nothing parses (those are left to the store's own one-line error)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    db = parsed.database
    if parsed.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)
