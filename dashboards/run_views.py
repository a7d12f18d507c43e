"""Run pages: the list of runs, one run (with live progress while it runs), the diff of two runs, what regressed in
the last N days, and the captured logs of an architecture in a run; all read through ``service.queries`` and
``service.history``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse
from sqlalchemy.orm import Session

from compat.results import ALL_CHECKS, RunKind, Status
from compat.states import RunState
from dashboards.templating import not_found, render
from service import history, queries
from service.deps import get_session

router = APIRouter(include_in_schema=False)
RUNS_PER_PAGE = 50


MAX_PAGE = 1_000_000  # (page - 1) * per_page becomes a SQL OFFSET: past a 64-bit integer SQLite raises OverflowError


def _int(value: str | None, default: int) -> int:
    try:
        return min(MAX_PAGE, max(1, int(value or default)))
    except ValueError:
        return default


@router.get("/runs", response_class=HTMLResponse)
def runs(request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    """Sweeps by default (a flood of submissions never pushes them off the first page); submissions one tab away."""
    page = _int(request.query_params.get("page"), 1)
    asked = request.query_params.get("kind", RunKind.SWEEP)
    kind = asked if asked in set(RunKind) else RunKind.SWEEP
    data = queries.list_runs(session, kind=kind, page=page, per_page=RUNS_PER_PAGE)
    pages = max(1, -(-data.total // RUNS_PER_PAGE))
    return render(request, "runs.html", page_title="Runs" if kind == RunKind.SWEEP else "Submission runs",
                  runs=data, page=page, pages=pages, kind=str(kind))


@router.get("/runs/diff", response_class=HTMLResponse)
def run_diff(request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
    try:
        diff = queries.diff_runs(session, a, b)
        ra, rb = (queries.get_run(session, x, with_results=False) for x in (a, b))
    except queries.NotFound as exc:
        return not_found(request, "Run", f"Cannot compare: {exc}.", "/runs", "Back to the runs")
    checks = [str(c) for c in ALL_CHECKS if str(c) in set(ra.checks) | set(rb.checks)]
    return render(request, "diff.html", page_title="Run diff", diff=diff, a=ra, b=rb, checks=checks)


@router.get("/regressions", response_class=HTMLResponse)
def regressions(request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    """What regressed in the last N days (``service.history.regressions_since``, the API's answer)."""
    days = min(history.MAX_DAYS, _int(request.query_params.get("days"), 30))
    return render(request, "regressions.html", page_title="Regressions",
                  data=history.regressions_since(session, days))


def _percent(results: int, planned: int) -> float:
    return round(100 * results / planned, 1) if planned else 0.0


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run(run_id: str, request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    try:
        detail = queries.get_run(session, run_id)
    except queries.NotFound:
        return not_found(request, "Run", f"No run with id “{run_id}”.", "/runs", "Back to the runs")
    order = {str(s): i for i, s in enumerate(Status)}
    counts = sorted(detail.status_counts.items(), key=lambda kv: order.get(kv[0], 99))
    failures = [r for r in detail.result_list if r.status != Status.PASS]
    return render(request, "run.html", page_title=f"Run {run_id[:8]}", run=detail, status_counts=counts,
                  failures=failures, prev=queries.previous_run_id(session, run_id),
                  percent=_percent(detail.results, detail.planned))


@router.get("/runs/{run_id}/progress.json")
def run_progress(run_id: str, session: Session = Depends(get_session)) -> JSONResponse:
    """Polled by the run page while the run is in progress."""
    try:
        d = queries.get_run(session, run_id, with_results=False)
    except queries.NotFound:
        return JSONResponse({"error": "not found"}, status_code=404)
    return JSONResponse({"state": d.state, "results": d.results, "planned": d.planned,
                         "percent": _percent(d.results, d.planned), "final": d.state != RunState.RUNNING})


@router.get("/runs/{run_id}/log/{architecture}", response_class=HTMLResponse)
def run_log(run_id: str, architecture: str, request: Request, session: Session = Depends(get_session)
            ) -> HTMLResponse:
    logs = queries.result_logs(session, run_id, architecture)
    if not logs:
        return not_found(request, "Log", f"No captured log for {architecture} in run {run_id[:8]}.",
                         f"/architectures/{architecture}", "Back to the architecture")
    return render(request, "log.html", page_title=f"Log of {architecture}", run_id=run_id,
                  architecture=architecture, logs=logs)
