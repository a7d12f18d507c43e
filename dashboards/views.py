"""The dashboard's HTML pages: one FastAPI ``router``, mounted at ``/`` by ``mount_pages`` (the app factory's
``pages`` hook, passed by ``cli.serve``).

Every number shown is read through ``service.queries`` (the same functions as the REST API), so page and API agree.
This module holds the overview, matrix, architecture and blockers pages; runs and submissions include their own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.orm import Session

from compat import status_filter
from compat.identity import resolve as resolve_identity
from compat.results import ALL_CHECKS, arch_verdict
from compat.settings import Settings
from compat.states import RunState
from dashboards import matrix as mx
from dashboards.cache import PAGE_CACHE
from dashboards.changes import changed_cells, history_changes, latest_changes
from dashboards.charts import Series, legend_items, line_chart
from dashboards.model_views import router as model_router
from dashboards.run_views import router as run_router
from dashboards.submit_views import router as submit_router
from dashboards.templating import not_found, refused, render
from service import model_queries, queries
from service.deps import app_settings, get_session

router = APIRouter(include_in_schema=False)
FIRST_COMMAND = "compat sweep"
STATIC_DIR = Path(__file__).parent / "static"


def mount_pages(app: FastAPI) -> None:
    """Serve the pages at ``/`` and their assets at ``/static`` on a service app (``create_app(pages=...)``)."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


def _top_n(request: Request, settings: Settings) -> int:
    """Top-N of the headline: ``?top=`` when given and valid, else the setting."""
    try:
        return min(100_000, max(1, int(request.query_params.get("top", ""))))  # the setting's own bound
    except ValueError:
        return settings.dashboard_top_n


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, session: Session = Depends(get_session),
             settings: Settings = Depends(app_settings)) -> HTMLResponse:
    """Headline coverage per device, declared-support reference rows, coverage over time, last night's changes."""
    runs = queries.list_runs(session, per_page=1)
    if runs.total == 0:
        return render(request, "empty.html", page_title="No runs yet", command=FIRST_COMMAND)
    top_n = _top_n(request, settings)
    data = PAGE_CACHE.get(session, ("overview", top_n, settings.device),
                          lambda: _overview_data(session, top_n, settings.device))
    return render(request, "overview.html", page_title="Overview", top_n=top_n, **data)


def _overview_data(session: Session, top_n: int, lead_device: str) -> dict:
    """Everything the overview shows, from ``service.queries`` (cached per store state by the caller)."""
    # The device under test leads (its default profile: compat.identity.resolve); the other identities follow by name.
    items = queries.coverage(session).items
    lead_device = resolve_identity(lead_device, [c.device for c in items]) or lead_device
    cov = sorted(items, key=lambda c: (c.device != lead_device, c.device))
    cov_top = {c.device: c for c in queries.coverage(session, top_n=top_n).items}
    running = [r for r in queries.list_runs(session, state=RunState.RUNNING, per_page=10).items if r.trigger != "submission"]

    histories = [queries.coverage_history(session, c.device) for c in cov]
    labels, series = _history_series(histories)

    diffs = []
    for c in cov:
        prev = queries.previous_run_id(session, c.run_id)
        if prev is not None:
            run = queries.get_run(session, c.run_id, with_results=False)
            diffs.append({"device": c.device, "trigger": run.trigger, "prev": prev, "latest": c.run_id,
                          "diff": queries.diff_runs(session, prev, c.run_id)})
    return {
        "coverage": cov, "coverage_top": cov_top, "declared": queries.declared_coverage(session, top_n=top_n),
        "running": running, "diffs": diffs,
        "chart": line_chart(series, labels, title="Supported architectures per run"),
        "chart_legend": legend_items(series),
        "model_headline": _model_headline(session),
    }


def _model_headline(session: Session) -> str | None:
    """The per-model headline (``service.model_queries.headline``: the CLI's and the API's words), if any."""
    head = model_queries.headline(session)
    return head.text() if head else None


def _history_series(histories: list) -> tuple[list[str], list[Series]]:
    """Align every device's history on one time axis (runs by start time) with gaps where a device has no run."""
    points = sorted({(p.started, p.run_id) for h in histories for p in h.points})
    index = {run_id: i for i, (_, run_id) in enumerate(points)}
    labels = [started.strftime("%m-%d %H:%M") for started, _ in points]
    series = []
    for h in histories:
        values: list[float | None] = [None] * len(points)
        for p in h.points:
            values[index[p.run_id]] = p.fraction * 100
        series.append(Series(h.device, values))
    return labels, series


@router.get("/matrix", response_class=HTMLResponse)
def matrix(request: Request, session: Session = Depends(get_session),
           settings: Settings = Depends(app_settings)) -> HTMLResponse:
    """One row per architecture, one column per (device, check); filters, search and sort live in the URL."""
    query = mx.MatrixQuery.from_params(request.query_params)
    if query.status:  # the API's vocabulary and its refusal (422), never a silently unfiltered matrix
        try:
            status_filter.normalise(query.status)
        except ValueError as exc:
            return refused(request, "Status filter", f"{exc}.", "/matrix", "Back to the matrix")
    rows, devices = PAGE_CACHE.get(session, ("matrix", settings.device), lambda: _matrix_rows(session, settings.device))
    # A plain device name (``neuron``) names its default profile's identity (``neuron (trn2)``).
    if query.device and query.device not in devices and (ident := resolve_identity(query.device, devices)):
        query = replace(query, device=ident)
    ranked = PAGE_CACHE.get(session, ("matrix-ranked",),
                            lambda: any(c.ranked for c in queries.coverage(session).items))
    # A filter naming no measured device or no check is said, not answered with an empty matrix.
    if query.device and query.device not in devices:
        return not_found(request, "Device", f"No finished full run on “{query.device}”; measured devices: "
                         f"{', '.join(devices) or 'none yet'}.", "/matrix", "Back to the matrix")
    if query.check and query.check not in {c for r in rows for _, c in r.cells}:
        return not_found(request, "Check", f"No results for a check named “{query.check}”.", "/matrix",
                         "Back to the matrix")
    cols = mx.columns(rows, devices, query)
    shown = mx.apply(rows, cols, query)
    page_rows, page_no, pages = mx.paginate(shown, query.page)
    spans: list[tuple[str, int]] = []
    for d, _ in cols:
        if spans and spans[-1][0] == d:
            spans[-1] = (d, spans[-1][1] + 1)
        else:
            spans.append((d, 1))
    checks = [str(c) for c in ALL_CHECKS if any(c2 == str(c) for _, c2 in mx.columns(rows, devices, mx.MatrixQuery()))]
    return render(
        request, "matrix.html", page_title="Architecture matrix", query=query, rows=page_rows, cols=cols,
        device_spans=spans, devices=devices, checks=checks, status_groups=mx.STATUS_GROUPS, ranked=ranked,
        shown_total=len(shown), all_total=len(rows), page=page_no, pages=pages,
    )


def _matrix_rows(session: Session, lead_device: str) -> tuple[list[mx.MatrixRow], list[str]]:
    """All architectures pivoted to matrix rows, with the cells changed since each device's previous run."""
    page = queries.list_architectures(session, per_page=1_000_000)
    lead = resolve_identity(lead_device, sorted({r.device for r in page.items})) or lead_device
    rows, devices = mx.pivot(page.items, devices_order=[lead])
    latest_run_by_device = {r.device: r.run_id for r in page.items}
    for device, run_id in latest_run_by_device.items():
        prev = queries.previous_run_id(session, run_id)
        if prev is None:
            continue
        changed = changed_cells(queries.diff_runs(session, prev, run_id), device)
        for row in rows:
            row.changed |= changed.get(row.name, set())
    return rows, devices


@router.get("/architectures/{name}", response_class=HTMLResponse)
def architecture(name: str, request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    """Latest results with metrics, blocking op and error, history, reproducer, log links and badge snippet."""
    try:
        d = queries.architecture_detail(session, name)
    except queries.NotFound:
        return not_found(request, "Architecture", f"No architecture named “{name}” has been catalogued or run.",
                         "/matrix", "Back to the matrix")
    latest_run = d.latest_runs  # device -> the run ``latest`` came from (the read rule, not the newest point)
    base = str(request.base_url).rstrip("/")
    badge = f"[![neuron-compat: {d.name}]({base}{d.badge_url})]({base}/architectures/{d.name})"
    history_checks = [str(c) for c in ALL_CHECKS if any(str(c) in h.statuses for h in d.history)]
    return render(
        request, "architecture.html", page_title=d.name, d=d, latest_run=latest_run,
        changed=latest_changes(d.history, latest_run.values()), history=history_changes(d.history),
        history_checks=history_checks, badge_markdown=badge,
        # The verdict word per device (compat.results.arch_verdict, the headline's rule): the pill says "natively"
        # or "with CPU fallback" as loudly as it says "supported".
        verdict_words={dev: arch_verdict([r for r in d.latest if r.device == dev]) for dev in d.supported},
        submitted_checks=[str(c) for c in ALL_CHECKS if any(str(c) in h.statuses for h in d.submitted)],
    )


@router.get("/blockers", response_class=HTMLResponse)
def blockers(request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    """Ops ranked by how many architectures they block, each linking to those architectures."""
    devices = queries.device_names(session)
    device = request.query_params.get("device") or None
    try:
        data = queries.blockers(session, device=device)
    except queries.NotFound as exc:  # an unknown device, or one with no finished full run: said, not ignored
        return not_found(request, "Device", f"{exc}.", "/blockers", "All devices")
    return render(request, "blockers.html", page_title="Op blockers", data=data, devices=devices, device=device)


router.include_router(run_router)
router.include_router(submit_router)
router.include_router(model_router)
