"""Per-run roll-ups shared by the store and the queries: statuses by architecture, catalog, support counts.

Roll-ups are cached per process, keyed by the run's ``data_version`` (bumped on every write), so they are
never stale. The support rule is ``compat.results.is_supported_statuses``, not a copy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from compat.blocking import blocking_record, shown_record
from compat.entities import CATALOG_ROW_FIELDS
from compat.results import FAILURE_STATUSES, SUPPORT_CHECKS, Status, is_supported_statuses
from service.models import Result, Run, RunArchitecture
from service.run_fields import RUN_CATALOG_COLUMNS

_SUPPORT = tuple(str(c) for c in SUPPORT_CHECKS)
_PASS = str(Status.PASS)


@dataclass
class ArchOutcome:
    """One architecture's results in one run on one device, reduced to what lists and diffs show."""

    statuses: dict[str, str] = field(default_factory=dict)
    rank: int | None = None
    blocking_op: str | None = None
    error: str | None = None
    fallback: bool = False
    fallback_checks: set[str] = field(default_factory=set)  # checks whose record ran an op on the CPU
    fallback_ops: dict[str, list[str]] = field(default_factory=dict)  # check -> the ops it ran on the CPU

    @property
    def supported(self) -> bool:
        return is_supported_statuses(self.statuses)


@dataclass(frozen=True)
class CatalogRow:
    """A run's catalog row (compat.entities.CATALOG_ROW_FIELDS, the name as ``architecture``)."""

    architecture: str
    rank: int
    model_type: str = ""
    representative: str | None = None
    remote_code: bool = False
    downloads: int = 0


@dataclass(frozen=True)
class RunView:
    """A run's roll-up: outcome per architecture on the run's device, and its catalog by rank.

    Shared between requests through the cache: callers must not mutate it."""

    outcomes: dict[str, ArchOutcome]
    catalog: list[CatalogRow]

    @property
    def supported(self) -> int:
        return sum(1 for c in self.catalog if c.architecture in self.outcomes
                   and self.outcomes[c.architecture].supported)


_CACHE_SIZE = 64
_cache: OrderedDict[tuple, RunView] = OrderedDict()
_cache_lock = threading.Lock()


def run_view(session: Session, run: Run) -> RunView:
    """The roll-up of ``run`` (cached by database, run id and data version)."""
    key = (str(session.get_bind().url), run.id, run.device, run.data_version)
    with _cache_lock:
        view = _cache.get(key)
        if view is not None:
            _cache.move_to_end(key)
            return view
    outcomes = arch_outcomes(session, run.id, run.device)
    view = RunView(outcomes=outcomes, catalog=_catalog_rows(session, run, outcomes))
    with _cache_lock:
        _cache[key] = view
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return view


def _catalog_rows(session: Session, run: Run, outcomes: dict[str, ArchOutcome]) -> list[CatalogRow]:
    rows = session.connection().execute(
        select(*(getattr(RunArchitecture, RUN_CATALOG_COLUMNS[f]) for f in CATALOG_ROW_FIELDS))
        .where(RunArchitecture.run_id == run.id).order_by(RunArchitecture.rank, RunArchitecture.architecture)
    ).all()
    if rows:
        return [CatalogRow(**{RUN_CATALOG_COLUMNS[f]: v for f, v in zip(CATALOG_ROW_FIELDS, r, strict=True)})
                for r in rows]
    big = 10**9  # results without a rank sort last
    return sorted((CatalogRow(a, o.rank if o.rank is not None else big) for a, o in outcomes.items()),
                  key=lambda c: (c.rank, c.architecture))


def arch_outcomes(session: Session, run_id: str, device: str) -> dict[str, ArchOutcome]:
    # Core execution on the session's connection: the ORM result machinery costs ~3x on 1000s of rows.
    rows = session.connection().execute(
        select(Result.architecture, Result.check, Result.status, Result.rank, Result.blocking_op,
               Result.error_type, Result.error_message, Result.has_fallback)
        .where(Result.run_id == run_id, Result.device == device)
    ).all()
    out: dict[str, ArchOutcome] = {}
    detail = []  # failing rows and rows that carry an error: few, so only these are read for what blocks
    for row in rows:
        arch, check, status, rank, blocking_op, etype, emsg, fallback = row
        o = out.get(arch)
        if o is None:
            o = out[arch] = ArchOutcome(rank=rank)
        o.statuses[check] = status
        if o.rank is None:
            o.rank = rank
        if fallback:
            o.fallback_checks.add(check)
            o.fallback = o.fallback or check in _SUPPORT
        if status in FAILURE_STATUSES or (status != _PASS and (etype or emsg)):
            detail.append(row)
    if any(o.fallback_checks for o in out.values()):
        _add_fallback_ops(session, run_id, device, out)
    by_arch: dict[str, list[_Detail]] = {}
    for arch, check, status, _rank, op, etype, emsg, _fb in detail:
        by_arch.setdefault(arch, []).append(_Detail(check, status, op, f"{etype}: {emsg}" if etype else emsg))
    for arch, rows_of in by_arch.items():
        # What blocks it is the one rule (compat.blocking); with no failure, the error says why there is no verdict.
        o = out[arch]
        blocking = blocking_record(rows_of)
        o.blocking_op = blocking.blocking_op if blocking is not None else None
        shown = blocking if blocking is not None and blocking.error else shown_record(
            [r for r in rows_of if r.error and r is not blocking])
        o.error = shown.error if shown is not None else None
    return out


class _Detail(NamedTuple):
    """A stored row that carries an op or an error, as ``compat.blocking`` reads it."""

    check: str
    status: str
    blocking_op: str | None
    error: str | None


def _add_fallback_ops(session: Session, run_id: str, device: str, out: dict[str, ArchOutcome]) -> None:
    """Each outcome's ops on the CPU, per check: a second query over the flagged rows only, so the roll-up of a
    run with few fallbacks decodes few JSON lists."""
    rows = session.connection().execute(
        select(Result.architecture, Result.check, Result.fallback_ops)
        .where(Result.run_id == run_id, Result.device == device, Result.has_fallback)
    ).all()
    for arch, check, ops in rows:
        # Under READ COMMITTED a result written between the two queries may be one ``out`` has not seen.
        if ops and arch in out:
            out[arch].fallback_ops[check] = list(ops)


def run_counts(session: Session, run: Run) -> tuple[int, int, int]:
    """(architectures in catalog, supported, result rows) of one run on its own device."""
    view = run_view(session, run)
    return len(view.catalog), view.supported, sum(len(o.statuses) for o in view.outcomes.values())
