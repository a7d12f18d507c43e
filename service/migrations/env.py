"""Alembic environment: runs migrations on the connection ``service.db.upgrade`` hands over.

Falls back to the configured URL when run by the alembic CLI (e.g. ``alembic revision --autogenerate``).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from service.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:  # noqa: ANN001
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds tables instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        _run(conn)
