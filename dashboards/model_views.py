"""Per-model pages: ``/models`` (the per-model headline, every stored model, and the "Look it up" box's target)
and ``/models/{org}/{name}`` (one model's verdict, checks and real-size plan), read through
``service.model_queries``, the functions the API and ``compat lookup`` call.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy.orm import Session

from compat.model_rows import valid_model_id
from compat.plan import BASIS, plan_text
from dashboards.templating import not_found, render
from service import model_queries
from service.deps import get_session

router = APIRouter(include_in_schema=False)


@router.get("/models", response_class=HTMLResponse, response_model=None)
def models(request: Request, session: Session = Depends(get_session)) -> HTMLResponse | RedirectResponse:
    """The box's target: ``?q=ORG/NAME`` goes to that model's page; else the list with the per-model headline."""
    q = (request.query_params.get("q") or "").strip()
    if q:
        if not valid_model_id(q) or "/" not in q:
            return render(request, "models.html", status_code=422, page_title="Models", headline=None, pairs=[],
                          error=f"“{q[:200]}” is not a Hub model id (ORG/NAME).", basis=BASIS, q=q[:200])
        return RedirectResponse(f"/models/{q}", status_code=303)
    head = model_queries.headline(session)
    return render(request, "models.html", page_title="Models", headline=head.text() if head else None,
                  pairs=model_queries.list_models(session), error=None, basis=BASIS, q="")


@router.get("/models/{org}/{name}", response_class=HTMLResponse)
def model(org: str, name: str, request: Request, session: Session = Depends(get_session)) -> HTMLResponse:
    model_id = f"{org}/{name}"
    answer = model_queries.lookup(session, model_id) if valid_model_id(model_id) else None
    if answer is None:
        return not_found(request, "Model", f"“{model_id[:200]}” is not in this catalog and its architecture is "
                         f"unknown here; {model_queries.SUBMIT_HINT}.", "/submit", "Submit a model")
    return render(request, "model.html", page_title=answer.model_id, a=answer,
                  plan_line=plan_text(answer.plan) if answer.plan else None)
