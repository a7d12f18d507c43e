"""Engines, sessions and schema migrations for the results store, from a database URL.

SQLite (the embedded default) gets WAL mode, foreign keys and a busy timeout; PostgreSQL is used as is.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from compat.settings import SettingError, get_settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DBAPI connection type
    cur = dbapi_conn.cursor()
    # WAL lets the API read while a sweep writes; busy_timeout waits out a concurrent writer.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def resolve_url(database_url: str | None = None) -> str:
    return database_url or get_settings().database_url


def get_engine(database_url: str | None = None) -> Engine:
    """One engine per URL per process (engines own connection pools)."""
    url = resolve_url(database_url)
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            try:
                engine = _new_engine(url)
            except (ArgumentError, NoSuchModuleError, OSError, ValueError) as exc:
                raise SettingError(f"COMPAT_DATABASE_URL={url!r} cannot be used: {exc}") from exc
            _engines[url] = engine
        return engine


def _new_engine(url: str) -> Engine:
    parsed = make_url(url)
    kwargs: dict = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database
        if db and db != ":memory:" and not db.startswith("file:"):
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
    engine = create_engine(url, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def dispose_engine(database_url: str) -> None:
    with _lock:
        engine = _engines.pop(database_url, None)
    if engine is not None:
        engine.dispose()


def dispose_all(close: bool = False) -> None:
    """Drop every engine's pooled connections; the engines stay registered and reconnect on next use.
    ``close=False`` leaves the sockets open: after a fork the parent still owns them, and closing them from the
    child would end the parent's sessions too."""
    with _lock:
        engines = list(_engines.values())
    for engine in engines:
        engine.dispose(close=close)


def session_factory(database_url: str | None = None) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(database_url), expire_on_commit=False)


@contextmanager
def session_scope(database_url: str | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on any exception."""
    session = session_factory(database_url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' is alembic's interpolation char; URL-encoded passwords contain it.
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(_alembic_config("sqlite://")).get_current_head()


def current_revision(database_url: str | None = None) -> str | None:
    engine = get_engine(database_url)
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


_upgraded: set[str] = set()


@contextmanager
def _migration_lock(url: str) -> Iterator[None]:
    """Serialise migrations across processes. SQLite runs DDL outside transactions (pysqlite autocommits it),
    so two processes migrating one fresh file would interleave: an exclusive lock file next to the DB prevents it."""
    parsed = make_url(url)
    db_path = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if not db_path or db_path == ":memory:" or db_path.startswith("file:"):
        yield
        return
    Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{db_path}.migrate-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def upgrade(database_url: str | None = None) -> str:
    """Bring the schema to the newest migration (no-op when already there); returns the head revision."""
    url = resolve_url(database_url)
    head = head_revision()
    try:
        return _upgrade(url, head)
    except OperationalError as exc:  # the server is down, the file cannot be opened: the setting's fault, in one line
        raise SettingError(f"COMPAT_DATABASE_URL={url!r}: cannot open the database: {exc.orig}") from exc


def _upgrade(url: str, head: str) -> str:
    if url in _upgraded or current_revision(url) == head:
        _upgraded.add(url)
        return head
    cfg = _alembic_config(url)
    with _migration_lock(url):
        # Re-check under the lock: another process may have migrated while we waited.
        if current_revision(url) != head:
            with get_engine(url).begin() as conn:
                if conn.dialect.name == "postgresql":  # PG DDL is transactional: a tx lock serialises it
                    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7270001)")
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
    _upgraded.add(url)
    return head
