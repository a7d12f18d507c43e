"""Per-model endpoints: ``GET /api/v1/models/{org}/{name}`` (a model's verdict, checks and real-size plan) and
``GET /api/v1/models`` (the per-model headline and every stored model), read through ``service.model_queries``.

An unknown model is a 404 that says how to submit it; a malformed id a one-line 422.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel
from sqlalchemy.orm import Session

from compat.model_rows import ModelAnswer
from service import model_queries
from service.api.badges import COLORS, render_badge
from service.api.deps import READ_ERRORS, reject_unknown_query
from service.deps import get_session
from service.runs import NotFound

router = APIRouter(dependencies=[Depends(reject_unknown_query)], responses=READ_ERRORS, tags=["models"])

# One part of a Hub id (huggingface_hub's repo-name rule, 96 characters at most).
PART = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$"
Part = Annotated[str, Path(min_length=1, max_length=96, pattern=PART)]
Device = Annotated[str | None, Query(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-:]+$")]
SessionDep = Annotated[Session, Depends(get_session)]


class ModelList(BaseModel):
    headline: str | None  # compat.model_rows.ModelHeadline.text(): the same words as the CLI and the pages
    models: list[ModelAnswer]


@router.get("/models", response_model=ModelList, summary="The per-model headline and every stored model")
def models(session: SessionDep, device: Device = None) -> ModelList:
    head = model_queries.headline(session, device)
    return ModelList(headline=head.text() if head else None,
                     models=[a for _, a in model_queries.list_models(session, device)])


# A model's verdict as the architecture badge's states (service.api.badges).
BADGE_STATE = {"supported": "supported", "supported_with_fallback": "fallback", "failing": "unsupported",
               "refused": "unsupported"}


@router.get("/models/{org}/{name}/badge.svg", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}, "description": "SVG badge"}})
def model_badge(session: SessionDep, org: Part, name: Part, device: Device = None) -> Response:
    """The per-model badge: the model's own verdict (its tiny config's run), for a model card."""
    answer = model(session, org, name, device)
    state = BADGE_STATE.get(answer.verdict, "not tested")
    svg = render_badge(answer.device or "neuron", state, COLORS[state])
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "max-age=300"})


@router.get("/models/{org}/{name}", response_model=ModelAnswer,
            summary="A model's verdict, checks and real-size plan (planned from config.json, not run)")
def model(session: SessionDep, org: Part, name: Part, device: Device = None) -> ModelAnswer:
    model_id = f"{org}/{name}"
    if ".." in model_id or "--" in model_id:
        raise HTTPException(422, f"invalid model id {model_id!r}: '..' and '--' are not allowed in a Hub id")
    answer = model_queries.lookup(session, model_id, device)
    if answer is None:
        raise NotFound(f"{model_id} is not in this catalog and its architecture is unknown here; "
                       f"{model_queries.SUBMIT_HINT}")
    return answer
