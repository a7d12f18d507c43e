"""What the results store knows, for the command line's input checks: run ids, and architectures with results.

Loaded only when a check needs the store (SQLAlchemy), never torch: ``cli`` imports it where a run id or an
architecture name unknown to the catalog must be looked up.
"""

from __future__ import annotations

from sqlalchemy import select

from cli.console import fail
from cli.sqlite_path import sqlite_file
from cli.suggest import unknown
from compat.settings import get_settings
from service.models import Result, Run
from service.store import Store

# Where a user finds every run id, newest first (the API's `GET /api/v1/runs` and the runs page list the same).
LIST_RUNS = "`compat runs list --kind all`"


def missing_store(url: str) -> bool:
    """Whether ``url`` names an SQLite file that does not exist yet: a read must say so, not create an empty one
    (opening a ``Store`` creates and migrates it). A server database, or a URL nothing parses, is left to the store."""
    path = sqlite_file(url)
    if path is None or path.exists():
        return False
    # A path no store can ever be at (a parent is a file) is the URL's fault: left to the store's one-line error.
    nearest = next((p for p in path.parents if p.exists()), None)
    return nearest is None or nearest.is_dir()


def _reading(store: Store | None) -> Store | None:
    """The store to look in; None when the default one does not exist yet (it then holds nothing)."""
    if store is None and missing_store(get_settings().database_url):
        return None
    return store or Store()


def run_ids(store: Store | None = None) -> list[str]:
    """Every run id, newest first."""
    if (store := _reading(store)) is None:
        return []
    with (store or Store()).session() as s:
        return list(s.scalars(select(Run.id).order_by(Run.started.desc(), Run.id.desc())))


def architectures(store: Store | None = None) -> list[str]:
    """Every architecture with at least one stored result."""
    if (store := _reading(store)) is None:
        return []
    with store.session() as s:
        return list(s.scalars(select(Result.architecture).distinct().order_by(Result.architecture)))


def run_id(name: str, store: Store | None = None) -> str:
    """``name`` must be a stored run; else exit 2 naming up to three close run ids."""
    if (store := _reading(store)) is None:  # no store there yet: say which one was looked in
        raise fail(unknown("run id", name, [], plural="runs") + f" in {get_settings().database_url} (no store yet)")
    with store.session() as s:
        if s.get(Run, name) is not None:
            return name
    raise fail(unknown("run id", name, run_ids(store), list_all=LIST_RUNS, plural="runs",
                       max_listed=0))


def architecture_known(name: str, store: Store | None = None) -> bool:
    """Whether the store holds results of ``name`` (an architecture from a Hub listing or a submission may be
    there without being in the current catalog)."""
    if (store := _reading(store)) is None:
        return False
    with store.session() as s:
        return s.scalar(select(Result.id).where(Result.architecture == name).limit(1)) is not None
