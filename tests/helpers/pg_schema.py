"""PostgreSQL for the test areas that need it (service, distributed): find or start the local server, and give
each test a private schema (search_path) so concurrent runs and earlier tests never share rows.

Imported by name: each such conftest puts this folder (not tests/, whose area folders would shadow the real
``service``/``worker`` packages) on sys.path. The fixtures stay in the areas' conftests with their own skip text.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ADMIN_DSN = "host=127.0.0.1 user={user} dbname=test"
PG_BASE = "postgresql+psycopg://{user}@127.0.0.1:5432/test"


def pg_user() -> str | None:
    """The role that can connect to database ``test`` (root or postgres, trust auth), or None when it is down."""
    import psycopg

    for user in ("root", "postgres"):
        try:
            psycopg.connect(ADMIN_DSN.format(user=user), connect_timeout=3).close()
            return user
        except psycopg.OperationalError:
            continue
    return None


def ensure_postgres() -> str | None:
    """``pg_user()``, after starting the local cluster(s) if nothing answered; None when it cannot be started."""
    user = pg_user()
    if user is None and shutil.which("pg_ctlcluster") and Path("/etc/postgresql").is_dir():
        for version in sorted(p.name for p in Path("/etc/postgresql").iterdir()):
            subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
                           capture_output=True, timeout=60)
        user = pg_user()
    return user


@contextmanager
def private_schema(user: str, prefix: str) -> Iterator[str]:
    """A database URL whose search_path is a fresh schema ``<prefix><random>``; the schema (and the engine the
    code under test made for the URL) is dropped afterwards."""
    import psycopg

    schema = f"{prefix}{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_DSN.format(user=user), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = PG_BASE.format(user=user) + f"?options=-csearch_path%3D{schema}"
    try:
        yield url
    finally:
        from service.db import dispose_engine

        dispose_engine(url)
        with psycopg.connect(ADMIN_DSN.format(user=user), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
