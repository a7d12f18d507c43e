"""Per-run roll-ups shared by the store and the queries: statuses by architecture, support counts.

``is_supported_statuses`` is pure; the rest read one run's result rows (narrow columns, never logs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from compat.results import SUPPORT_CHECKS, Status
from service.models import Result, Run, RunArchitecture

_SUPPORT = tuple(str(c) for c in SUPPORT_CHECKS)
_PASS = str(Status.PASS)


def is_supported_statuses(statuses: dict[str, str]) -> bool:
    """Supported = every support check present and passed (mirrors ``compat.results.is_supported``)."""
    return all(statuses.get(c) == _PASS for c in _SUPPORT)


@dataclass
class ArchOutcome:
    """One architecture's results in one run on one device, reduced to what lists and diffs show."""

    statuses: dict[str, str] = field(default_factory=dict)
    rank: int | None = None
    blocking_op: str | None = None
    error: str | None = None
    fallback: bool = False

    @property
    def supported(self) -> bool:
        return is_supported_statuses(self.statuses)


def arch_outcomes(session: Session, run_id: str, device: str) -> dict[str, ArchOutcome]:
    rows = session.execute(
        select(Result.architecture, Result.check, Result.status, Result.rank, Result.blocking_op,
               Result.error_type, Result.error_message, Result.fallback_ops)
        .where(Result.run_id == run_id, Result.device == device)
        .order_by(Result.id)
    )
    out: dict[str, ArchOutcome] = {}
    for arch, check, status, rank, blocking_op, etype, emsg, fallback in rows:
        o = out.setdefault(arch, ArchOutcome(rank=rank))
        o.statuses[check] = status
        if o.rank is None:
            o.rank = rank
        if o.blocking_op is None and blocking_op:
            o.blocking_op = blocking_op
        if o.error is None and (etype or emsg) and status != _PASS:
            o.error = f"{etype}: {emsg}" if etype else emsg
        if fallback and check in _SUPPORT:
            o.fallback = True
    return out


def run_catalog(session: Session, run: Run, outcomes: dict[str, ArchOutcome]) -> list[tuple[str, int]]:
    """(architecture, rank) of the run's catalog by rank; falls back to the archs that have results."""
    rows = session.execute(
        select(RunArchitecture.architecture, RunArchitecture.rank)
        .where(RunArchitecture.run_id == run.id).order_by(RunArchitecture.rank, RunArchitecture.architecture)
    ).all()
    if rows:
        return [(a, r) for a, r in rows]
    big = 10**9  # results without a rank sort last
    return sorted(((a, o.rank if o.rank is not None else big) for a, o in outcomes.items()),
                  key=lambda t: (t[1], t[0]))


def run_counts(session: Session, run: Run) -> tuple[int, int, int]:
    """(architectures in catalog, supported, result rows) of one run on its own device."""
    outcomes = arch_outcomes(session, run.id, run.device)
    catalog = run_catalog(session, run, outcomes)
    supported = sum(1 for a, _ in catalog if a in outcomes and outcomes[a].supported)
    return len(catalog), supported, sum(len(o.statuses) for o in outcomes.values())
