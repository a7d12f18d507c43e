"""Submissions: a Hub model id (optional revision) or an uploaded config.json, queued for a one-architecture run.

Writing needs a bearer token; the run itself starts through ``worker.interface`` after the 202 is sent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, File, Form, Path, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from service import queries
from service import schemas as S
from service.api.deps import WRITE_ERRORS, get_session, reject_unknown_query, require_token
from service.models import Submission
from service.validation import (
    MODEL_ID_PATTERN,
    REVISION_PATTERN,
    InvalidInput,
    check_config,
    parse_config,
    validate_repo_id,
    validate_revision,
)

router = APIRouter(dependencies=[Depends(reject_unknown_query)], responses=WRITE_ERRORS)


async def _read_capped(upload: UploadFile, limit: int) -> bytes:
    # Read one byte past the cap so an oversized upload is detected without reading all of it.
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise InvalidInput("config", f"config.json exceeds the upload limit of {limit} bytes")
    return data


@router.post("/submissions", status_code=202, response_model=S.SubmissionCreated,
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
    settings = request.app.state.settings
    if model_id is not None:
        validate_repo_id(model_id)
    if revision is not None:
        validate_revision(revision)
    cfg = None
    architecture = None
    if config is not None:
        cfg = parse_config(await _read_capped(config, settings.max_upload_bytes), settings.max_upload_bytes)
        # Building on the meta device is CPU work: keep it off the event loop.
        architecture, _ = await run_in_threadpool(check_config, cfg, settings.max_submission_params)
    elif model_id is None:
        raise InvalidInput("model_id", "give a Hub model id or upload a config.json")
    now = datetime.now(UTC)
    sub = Submission(model_id=model_id, revision=revision, config=cfg, architecture=architecture, state="queued",
                     token_name=token, created=now, updated=now)
    session.add(sub)
    session.commit()
    background.add_task(request.app.state.enqueue_submission, sub.id, request.app.state.database_url)
    url = f"/api/v1/submissions/{sub.id}"
    body = S.SubmissionCreated(id=sub.id, state=sub.state, url=url)
    return JSONResponse(body.model_dump(), status_code=202, headers={"Location": url})


@router.get("/submissions/{submission_id}", response_model=S.SubmissionOut)
def get_submission(session: Annotated[Session, Depends(get_session)],
                   submission_id: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> S.SubmissionOut:
    return queries.get_submission(session, submission_id)
