"""The dashboard's HTML pages: one FastAPI ``router`` that ``service.app.create_app()`` mounts at ``/``.

Every number shown is read through ``service.queries`` (the same functions as the REST API), so page and API agree.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def overview() -> str:
    """Placeholder until the service's queries land; replaced by the real overview page."""
    return "<!doctype html><title>neuron-compat</title><h1>neuron-compat</h1>"
