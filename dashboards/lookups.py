"""Small reads the pages need that ``service.queries`` does not offer (previous run of a trigger, captured logs),
written against the service's ORM models only; candidates to move into ``service.queries``."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import Result, Run


def previous_run_id(session: Session, run_id: str) -> str | None:
    """The newest run before ``run_id`` on the same device with the same trigger (what "last night" means)."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    q = (select(Run.id)
         .where(Run.device == run.device, Run.trigger == run.trigger, Run.state != "running",
                (Run.started < run.started) | ((Run.started == run.started) & (Run.id < run.id)))
         .order_by(Run.started.desc(), Run.id.desc()).limit(1))
    return session.scalar(q)


@dataclass(frozen=True)
class LogEntry:
    device: str
    check: str
    status: str
    log: str


def result_logs(session: Session, run_id: str, architecture: str) -> list[LogEntry]:
    """The captured stdout/stderr of every check of ``architecture`` in ``run_id`` (empty logs left out)."""
    rows = session.execute(
        select(Result.device, Result.check, Result.status, Result.log)
        .where(Result.run_id == run_id, Result.architecture == architecture).order_by(Result.id))
    return [LogEntry(d, c, s, log) for d, c, s, log in rows if log]
