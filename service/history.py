"""Reads for export and history: a run's results as CSV, what regressed in the last N days (each run in the
window against its own baseline, ``service.runs.baseline_run``, by the gate's rule), and which architectures are new
in a run's transformers release (against the newest earlier registry run on another version).

The rules are pure (``compat.results_csv``, ``compat.history``, ``compat.lane``); the API, the pages and the CLI
call these.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from compat.diff import diff_results
from compat.history import RunMoment, regression_history
from compat.lane import LIBRARY, NewInRelease, new_in_release
from compat.results import ResultRecord, Trigger
from compat.results_csv import to_csv
from service import schemas as S
from service.models import Result, Run, RunArchitecture
from service.records import aware, row_to_record
from service.runs import (
    FINISHED_SWEEP,
    baseline_run,
    check_device,
    get_run_row,
    run_records,
    selection_of,
)

MAX_DAYS = 366
MAX_RUNS = 500  # runs examined per window, newest first (each costs two record reads): the answer says how many


def results_csv(session: Session, run_id: str) -> str:
    """``GET /api/v1/runs/{id}/results.csv``: every result of the run, in the run page's order (NotFound: 404)."""
    get_run_row(session, run_id)
    rows = session.scalars(select(Result).where(Result.run_id == run_id)
                           .order_by(Result.rank.nulls_last(), Result.architecture, Result.id))
    return to_csv(run_id, (row_to_record(r) for r in rows))


def regressions_since(session: Session, days: int, *, device: str | None = None,
                      now: datetime | None = None) -> S.RegressionHistory:
    """Regressions of every finished sweep started in the last ``days`` days (on ``device`` if given), each run
    against its own baseline (same device, lane and trigger)."""
    since = (now or datetime.now(UTC)) - timedelta(days=days)
    q = select(Run).where(*FINISHED_SWEEP, Run.started >= since)
    if device is not None:
        q = q.where(Run.device == check_device(session, device))
    runs = list(session.scalars(q.order_by(Run.started.desc(), Run.id.desc()).limit(MAX_RUNS)))
    records: dict[str, list[ResultRecord]] = {}

    def recs(run_id: str) -> list[ResultRecord]:
        if run_id not in records:
            records[run_id] = run_records(session, run_id)
        return records[run_id]

    moments = []
    for run in runs:
        base = baseline_run(session, run.id, trigger=run.trigger)
        if base is None:
            continue
        diff = diff_results(recs(base.id), recs(run.id), baseline_run=base.id, current_run=run.id,
                            only=selection_of(session, run.id))
        moments.append(RunMoment(run.id, aware(run.started), run.device, run.trigger, run.lane or "pinned", diff))
    out = regression_history(moments)
    return S.RegressionHistory(days=days, since=since, runs_examined=len(runs),
                               events=[S.RegressionEvent(**e) for e in out["events"]],
                               architectures=[S.RegressedArchitecture(**a) for a in out["architectures"]])


def _catalog(session: Session, run_id: str) -> list[str]:
    return list(session.scalars(select(RunArchitecture.architecture).where(RunArchitecture.run_id == run_id)
                                .order_by(RunArchitecture.rank, RunArchitecture.architecture)))


def new_in_release_of(session: Session, run_id: str) -> NewInRelease | None:
    """For a sweep of the registry: its architectures that the newest earlier finished full registry sweep on another
    transformers version (same device; its own lane first, else any) did not have. None for other runs."""
    run = get_run_row(session, run_id)
    version = (run.versions or {}).get(LIBRARY)
    if run.catalog_source != "registry" or not version or run.trigger == Trigger.SUBMISSION:
        return None
    q = (select(Run).where(*FINISHED_SWEEP, Run.device == run.device,
                           Run.catalog_source == "registry", Run.scope == "full", Run.id != run.id,
                           Run.started <= run.started)
         .order_by(Run.started.desc(), Run.id.desc()))
    earlier = [r for r in session.scalars(q.limit(200)) if (r.versions or {}).get(LIBRARY) not in (None, version)]
    ref = next((r for r in earlier if r.lane == run.lane), earlier[0] if earlier else None)
    reference = (ref.id, ref.versions[LIBRARY], _catalog(session, ref.id)) if ref is not None else None
    return new_in_release(_catalog(session, run.id), version, reference)
