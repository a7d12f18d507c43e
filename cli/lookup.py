"""``compat lookup ORG/NAME [--json]``: a model's verdict, checks and real-size plan, read from the store.

No torch, no Transformers, no Alembic, no rich: SQLAlchemy over the store and plain ``print``, so the answer comes
in under a second. A read never creates or migrates a store: a missing one, or one older than the models table, is
one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from cli.exits import fail
from cli.sqlite_path import sqlite_file
from compat.model_rows import ModelAnswer, valid_model_id
from compat.plan import plan_text
from compat.settings import get_settings
from service import model_queries


def _no_sqlite_file(url: str) -> bool:
    """An SQLite URL whose file does not exist (``cli.stored.missing_store``'s first rule, without importing the
    store's writes and Alembic)."""
    path = sqlite_file(url)
    return path is not None and not path.exists()


@contextmanager
def _session() -> Iterator[Session]:
    url = get_settings().database_url
    if _no_sqlite_file(url):
        raise fail(f"no models in {url} (no store there yet); run `compat sweep --models` first", 1)
    # A plain engine, no migration on a read: a store older than the models table is answered below, in one line.
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


OLD_STORE = "the store has no models table yet: run `compat db upgrade`, then `compat sweep --models`"


def lookup(model_id: str, *, device: str | None, as_json: bool) -> None:
    if not valid_model_id(model_id):
        raise fail(f"invalid model id {model_id!r}: expected ORG/NAME as on the Hub (letters, digits, '-', '_', '.')")
    try:
        with _session() as s:
            answer = model_queries.lookup(s, model_id, device)
    except (OperationalError, ProgrammingError):
        raise fail(OLD_STORE, 1) from None
    if answer is None:
        raise fail(f"{model_id}: not in the store's catalog and its architecture is unknown here; "
                   f"{model_queries.SUBMIT_HINT}", 1)
    if as_json:
        print(json.dumps(answer.model_dump(mode="json"), indent=1))
        return
    print_answer(answer)


def print_answer(a: ModelAnswer) -> None:
    sha = f"@{a.sha[:12]}" if a.sha else ""
    print(f"{a.model_id}{sha}: {a.verdict} on {a.device or '?'} ({a.architecture}; {a.basis})")
    for check, c in a.checks.items():
        extra = f" at {c.blocking_op}" if c.blocking_op else ""
        why = f": {c.reason}" if c.reason and c.status != "pass" else ""
        print(f"  {check:9} {c.status}{extra}{why}")
    if a.plan:
        print("  plan: " + plan_text(a.plan))
    for line in a.differs_in[:10]:
        print(f"  differs from the judged model: {line}")
    if a.catalog:
        print(f"  catalog: {a.catalog}; run {a.run_id or '-'}")


def list_models(device: str | None) -> None:
    """The per-model headline, then each stored model's id and verdict."""
    try:
        with _session() as s:
            head = model_queries.headline(s, device)
            pairs = model_queries.list_models(s, device)
    except (OperationalError, ProgrammingError):
        raise fail(OLD_STORE, 1) from None
    if head is None:
        raise fail("no models stored; run `compat sweep --models` first", 1)
    print(head.text())
    for row, a in pairs:
        print(f"{row.model_id}  {a.verdict}  ({row.architecture})")
