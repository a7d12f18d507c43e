"""Fixtures of the service tests: a fresh database per test on SQLite and on PostgreSQL, seeded runs.

PostgreSQL tests get a private schema (search_path) so concurrent test runs never collide.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

# Test modules import ``svc_helpers`` from this directory; make that work under any --import-mode.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

PG_BASE = "postgresql+psycopg://{user}@127.0.0.1:5432/test"


def _pg_user() -> str | None:
    import psycopg

    for user in ("root", "postgres"):
        try:
            psycopg.connect(f"host=127.0.0.1 user={user} dbname=test", connect_timeout=3).close()
            return user
        except psycopg.OperationalError:
            continue
    return None


def _ensure_postgres() -> str | None:
    user = _pg_user()
    if user is None and shutil.which("pg_ctlcluster") and Path("/etc/postgresql").is_dir():
        for version in sorted(p.name for p in Path("/etc/postgresql").iterdir()):
            subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
                           capture_output=True, timeout=60)
        user = _pg_user()
    return user


@pytest.fixture(scope="session")
def pg_user() -> str:
    user = _ensure_postgres()
    if user is None:
        pytest.skip("PostgreSQL on 127.0.0.1:5432 is down and could not be started: postgres store tests NOT RUN")
    return user


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'compat.db'}"


@pytest.fixture
def pg_url(pg_user: str):
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"host=127.0.0.1 user={pg_user} dbname=test", autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = PG_BASE.format(user=pg_user) + f"?options=-csearch_path%3D{schema}"
    yield url
    from service.db import dispose_engine

    dispose_engine(url)
    with psycopg.connect(f"host=127.0.0.1 user={pg_user} dbname=test", autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


@pytest.fixture
def app_factory(sqlite_url: str):
    """Build an app on a fresh SQLite DB; submissions are recorded instead of run (the worker is tested apart)."""
    from compat.settings import Settings
    from service.app import create_app

    def make(**overrides):
        settings = Settings(database_url=sqlite_url, **overrides)
        app = create_app(settings)
        app.state.enqueued = []
        app.state.enqueue_submission = lambda sid, url: app.state.enqueued.append((sid, url))
        return app

    return make


@pytest.fixture
def client(app_factory):
    from fastapi.testclient import TestClient

    with TestClient(app_factory()) as c:
        yield c


@pytest.fixture
def token(sqlite_url: str, client) -> str:
    from service import db
    from service.auth import create_token

    with db.session_scope(sqlite_url) as s:
        return create_token(s, "tester")
