"""Submissions: a Hub model id (optional revision) or an uploaded config.json, queued for a one-architecture run.

Writing needs a bearer token; the run itself starts after the 202 is sent, through the enqueue function the app was
created with (``create_app(enqueue_submission=...)``); an app created without one stores submissions queued. A full
queue answers 429 with Retry-After (``service.submissions.QueueFull``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, File, Form, Path, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from service import queries
from service import schemas as S
from service import submissions as rules
from service.api.deps import QUEUE_FULL, WRITE_ERRORS, reject_unknown_query, require_token
from service.deps import app_settings, get_session
from service.validation import MODEL_ID_PATTERN, REVISION_PATTERN

router = APIRouter(dependencies=[Depends(reject_unknown_query)], responses=WRITE_ERRORS)


@router.post("/submissions", status_code=202, response_model=S.SubmissionCreated, responses=QUEUE_FULL,
             summary="Submit a Hub model id (+revision) or a config.json for a one-architecture run")
async def create_submission(
    request: Request,
    background: BackgroundTasks,
    token: Annotated[str, Depends(require_token)],
    session: Annotated[Session, Depends(get_session)],
    model_id: Annotated[str | None, Form(max_length=96, pattern=MODEL_ID_PATTERN,
                                         description="Hub repo id: name or namespace/name")] = None,
    revision: Annotated[str | None, Form(max_length=128, pattern=REVISION_PATTERN,
                                         description="branch, tag or commit sha")] = None,
    config: Annotated[UploadFile | None, File(description="config.json")] = None,
) -> JSONResponse:
    settings = app_settings(request)
    raw = await config.read(rules.upload_read_size(settings)) if config is not None else None
    hook = request.app.state.enqueue_submission
    # The run starts after the 202 is sent. create_submission blocks (DB, meta-device build): off the event loop.
    try:
        sub = await run_in_threadpool(
            rules.create_submission, session, rules.SubmissionInput(model_id=model_id, revision=revision, config=raw),
            submitter=token, settings=settings, hub_config=request.app.state.hub_config,
            enqueue=None if hook is None else lambda sid: background.add_task(hook, sid, settings.database_url))
    except rules.QueueFull as full:
        return JSONResponse({"error": full.message, "detail": {"setting": full.setting, "limit": full.limit,
                                                               "retry_after_s": full.retry_after_s}},
                            status_code=429, headers={"Retry-After": str(full.retry_after_s)})
    url = f"/api/v1/submissions/{sub.id}"
    body = S.SubmissionCreated(id=sub.id, state=sub.state, url=url)
    return JSONResponse(body.model_dump(), status_code=202, headers={"Location": url})


@router.get("/submissions/{submission_id}", response_model=S.SubmissionOut)
def get_submission(session: Annotated[Session, Depends(get_session)],
                   submission_id: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> S.SubmissionOut:
    return queries.get_submission(session, submission_id)
