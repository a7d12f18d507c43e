"""What the results store knows, for the command line's input checks: run ids, and architectures with results.

Loaded only when a check needs the store (SQLAlchemy), never torch: ``cli`` imports it where a run id or an
architecture name unknown to the catalog must be looked up.
"""

from __future__ import annotations

from sqlalchemy import select

from cli.console import fail
from cli.suggest import unknown
from service.models import Result, Run
from service.store import Store

# Where a user finds every run id (the API lists them, newest first).
LIST_RUNS = "`GET /api/v1/runs` (or the dashboard's runs page)"


def run_ids(store: Store | None = None) -> list[str]:
    """Every run id, newest first."""
    with (store or Store()).session() as s:
        return list(s.scalars(select(Run.id).order_by(Run.started.desc(), Run.id.desc())))


def architectures(store: Store | None = None) -> list[str]:
    """Every architecture with at least one stored result."""
    with (store or Store()).session() as s:
        return list(s.scalars(select(Result.architecture).distinct().order_by(Result.architecture)))


def run_id(name: str, store: Store | None = None) -> str:
    """``name`` must be a stored run; else exit 2 naming up to three close run ids."""
    store = store or Store()
    with store.session() as s:
        if s.get(Run, name) is not None:
            return name
    raise fail(unknown("run id", name, run_ids(store), list_all=LIST_RUNS, plural="runs",
                       max_listed=0))


def architecture_known(name: str, store: Store | None = None) -> bool:
    """Whether the store holds results of ``name`` (an architecture from a Hub listing or a submission may be
    there without being in the current catalog)."""
    store = store or Store()
    with store.session() as s:
        return s.scalar(select(Result.id).where(Result.architecture == name).limit(1)) is not None
