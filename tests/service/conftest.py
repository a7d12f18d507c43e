"""Fixtures of the service tests: a fresh database per test on SQLite and on PostgreSQL, seeded runs.

PostgreSQL tests get a private schema (search_path) so concurrent test runs never collide.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Test modules import ``service_seed`` from this directory, and this file imports ``pg_schema`` (shared with
# tests/distributed) from tests/helpers; make both work under any --import-mode.
for _dir in (Path(__file__).parent, Path(__file__).parents[1] / "helpers"):
    if str(_dir) not in sys.path:
        sys.path.insert(0, str(_dir))

from pg_schema import ensure_postgres, private_schema  # noqa: E402 - needs the path set above


@pytest.fixture(scope="session")
def pg_user() -> str:
    user = ensure_postgres()
    if user is None:
        pytest.skip("PostgreSQL on 127.0.0.1:5432 is down and could not be started: postgres store tests NOT RUN")
    return user


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'compat.db'}"


@pytest.fixture
def pg_url(pg_user: str) -> Iterator[str]:
    with private_schema(pg_user, "t_") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


@pytest.fixture
def app_factory(sqlite_url: str):
    """Build the deployed composition (API + pages) on a fresh SQLite DB; submissions are recorded instead of run
    (running them is tested with the harness, tests/cli/test_submissions.py)."""
    from compat.settings import Settings
    from dashboards.views import mount_pages
    from service.app import create_app

    def make(**overrides):
        enqueued: list[tuple[int, str]] = []
        app = create_app(Settings(database_url=sqlite_url, **overrides),
                         enqueue_submission=lambda sid, url: enqueued.append((sid, url)), pages=mount_pages)
        app.state.enqueued = enqueued
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
