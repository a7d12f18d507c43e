"""Export and history endpoints: a run's results as CSV, and what regressed in the last N days.

Thin: validation here, the reads in ``service.history``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import Response

from service import history
from service import schemas as S
from service.api.deps import READ_ERRORS, reject_unknown_query
from service.api.results import NAME, Device, SessionDep

router = APIRouter(dependencies=[Depends(reject_unknown_query)], responses=READ_ERRORS)
CSV = "text/csv; charset=utf-8"


@router.get("/runs/{run_id}/results.csv", response_class=Response, summary="A run's results as CSV",
            responses={200: {"content": {"text/csv": {}}, "description": "header row, then one row per result"}})
def results_csv(session: SessionDep, run_id: Annotated[str, Path(max_length=64, pattern=NAME)]) -> Response:
    return Response(history.results_csv(session, run_id), media_type=CSV,
                    headers={"Content-Disposition": f'attachment; filename="run-{run_id[:12]}-results.csv"'})


@router.get("/regressions", response_model=S.RegressionHistory,
            summary="What regressed in the last N days (each run against its own baseline)")
def regressions(session: SessionDep, days: Annotated[int, Query(ge=1, le=history.MAX_DAYS)] = 30,
                device: Device = None) -> S.RegressionHistory:
    return history.regressions_since(session, days, device=device)
