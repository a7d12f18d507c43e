"""Reads for export and history: a run's results as CSV, and what regressed in the last N days (each run in the
window against its own baseline, ``service.runs.baseline_run``, by the gate's rule).

The rules are pure (``compat.results_csv``, ``compat.history``); the API and the ``/regressions`` page call these.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from compat.diff import FINISHED_STATES, diff_results
from compat.history import RunMoment, regression_history
from compat.results import ResultRecord
from compat.results_csv import to_csv
from service import schemas as S
from service.models import Result, Run
from service.records import aware, row_to_record
from service.runs import (
    IS_SUBMISSION,
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
    q = select(Run).where(~IS_SUBMISSION, Run.state.in_(FINISHED_STATES), Run.started >= since)
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
