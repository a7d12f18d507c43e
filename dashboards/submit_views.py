"""Submission pages: the form (Hub model id or uploaded config.json, plus an API token), its validation
messages, and the submission page that polls its status until the run is done."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from sqlalchemy.orm import Session

from compat.settings import Settings
from compat.states import ENDED_SUBMISSION_STATES, SubmissionState
from dashboards.submission_form import create_from_form
from dashboards.templating import not_found, render
from service import queries
from service import schemas as S
from service.deps import app_settings, get_session

router = APIRouter(include_in_schema=False)
_STATE_PROGRESS = {SubmissionState.QUEUED: (10, "Waiting for a worker."),
                   SubmissionState.RUNNING: (55, "Building and running the tiny model."),
                   SubmissionState.DONE: (100, "Done."), SubmissionState.FAILED: (100, "Failed.")}


def _form(request: Request, settings: Settings, *, values: dict[str, str] | None = None,
          errors: list[tuple[str, str]] | None = None, status_code: int = 200) -> HTMLResponse:
    errors = errors or []
    return render(request, "submit.html", status_code=status_code, page_title="Submit a model",
                  values={"model_id": "", "revision": "", **(values or {})}, errors=errors,
                  error_fields={f for f, _ in errors}, max_upload_kb=settings.max_upload_bytes // 1024)


@router.get("/submit", response_class=HTMLResponse)
def submit_form(request: Request, settings: Settings = Depends(app_settings)) -> HTMLResponse:
    return _form(request, settings)


@router.post("/submit", response_class=HTMLResponse, response_model=None)
async def submit(request: Request, session: Session = Depends(get_session),
                 settings: Settings = Depends(app_settings)) -> HTMLResponse | RedirectResponse:
    """Validate like the API does, create the submission, then redirect to its live page (303, POST/redirect/GET)."""
    form = await request.form()
    result = await create_from_form(session, form, settings, request.app.state.enqueue_submission,
                                    settings.database_url, getattr(request.app.state, "hub_config", None))
    if result.retry_after_s is not None:  # the queue is full: the input may be fine, the time is not
        page = _form(request, settings, values=result.values, errors=result.errors, status_code=429)
        page.headers["Retry-After"] = str(result.retry_after_s)
        return page
    if result.errors:
        return _form(request, settings, values=result.values, errors=result.errors, status_code=422)
    return RedirectResponse(f"/submissions/{result.submission_id}", status_code=303)


# Ids are SQLite/PostgreSQL integers: anything outside 1..2^31-1 cannot exist, and passing it to the database
# would raise (OverflowError) instead of answering "not found".
MAX_ID = 2**31 - 1


def _message(sub: S.SubmissionOut) -> tuple[int, str]:
    percent, message = _STATE_PROGRESS.get(sub.state, (0, ""))
    if sub.state == SubmissionState.QUEUED and sub.queue_position is not None:
        ahead = sub.queue_position - 1
        message = "Next in the queue." if ahead == 0 else f"Queue position {sub.queue_position} ({ahead} ahead)."
    return percent, message


def _find(session: Session, submission_id: int) -> S.SubmissionOut | None:
    if not 1 <= submission_id <= MAX_ID:
        return None
    try:
        return queries.get_submission(session, submission_id)
    except queries.NotFound:
        return None


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission(submission_id: int, request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    sub = _find(session, submission_id)
    if sub is None:
        return not_found(request, "Submission", f"No submission #{submission_id}.", "/submit", "Submit a model")
    percent, message = _message(sub)
    return render(request, "submission.html", page_title=f"Submission #{sub.id}", sub=sub, percent=percent,
                  message=message)


@router.get("/submissions/{submission_id}/status.json")
def submission_status(submission_id: int, session: Session = Depends(get_session)) -> JSONResponse:
    """Polled by the submission page once a second until the state is final."""
    sub = _find(session, submission_id)
    if sub is None:
        return JSONResponse({"error": "not found"}, status_code=404)
    percent, message = _message(sub)
    return JSONResponse({"state": sub.state, "percent": percent, "message": message,
                         "queue_position": sub.queue_position, "final": sub.state in ENDED_SUBMISSION_STATES,
                         "results": len(sub.results)})
