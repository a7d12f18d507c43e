"""Status badge of an architecture on a device, as a small SVG (for READMEs and model cards).

An architecture of the catalog with no result on the device gets a grey "not tested" badge (an embedded image of a
model not yet swept still renders); a name the catalog has never held is a 404, like every other unknown resource.
"""

from __future__ import annotations

from html import escape
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from compat.results import is_supported_statuses
from service.api.deps import READ_ERRORS, reject_unknown_query
from service.api.results import NAME
from service.deps import app_settings, get_session
from service.models import Architecture
from service.queries import latest_results_in
from service.runs import NotFound

router = APIRouter(dependencies=[Depends(reject_unknown_query)], responses=READ_ERRORS)

COLORS = {"supported": "#2e7d32", "fallback": "#f9a825", "unsupported": "#c62828", "not tested": "#9e9e9e"}


def badge_state(statuses: dict[str, str], fallback: bool) -> str:
    if not statuses:
        return "not tested"
    if is_supported_statuses(statuses):
        return "fallback" if fallback else "supported"
    return "unsupported"


def render_badge(label: str, value: str, color: str) -> str:
    # ~6.5 px per character at 11 px Verdana: close enough for a flat badge.
    lw, vw = 10 + int(6.5 * len(label)), 10 + int(6.5 * len(value))
    label, value = escape(label), escape(value)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lw + vw}" height="20" role="img" '
        f'aria-label="{label}: {value}"><title>{label}: {value}</title>'
        f'<rect width="{lw}" height="20" fill="#555"/><rect x="{lw}" width="{vw}" height="20" fill="{color}"/>'
        f'<g fill="#fff" text-anchor="middle" font-family="Verdana,sans-serif" font-size="11">'
        f'<text x="{lw / 2}" y="14">{label}</text><text x="{lw + vw / 2}" y="14">{value}</text></g></svg>'
    )


@router.get("/badges/{architecture}.svg", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}, "description": "SVG badge"}})
def badge(request: Request, session: Annotated[Session, Depends(get_session)],
          architecture: Annotated[str, Path(max_length=128, pattern=NAME)],
          device: Annotated[str | None, Query(min_length=1, max_length=64, pattern=NAME)] = None) -> Response:
    device = device or app_settings(request).device
    latest = latest_results_in(session, architecture, device)
    if not latest and session.get(Architecture, architecture) is None:
        raise NotFound(f"architecture {architecture!r} is not in the catalog; /api/v1/architectures lists them")
    state = badge_state({str(r.check): str(r.status) for r in latest},
                        any(r.fallback_ops for r in latest))
    svg = render_badge(device, state, COLORS[state])
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "max-age=300"})
