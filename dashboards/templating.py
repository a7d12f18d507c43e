"""The dashboard's Jinja2 environment: template loader, filters, the one ``render`` helper and the 404 page.

Autoescaping is on for every template; only markup built by our own helpers (status cells, SVG charts) is trusted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from compat.ops import op_dtypes
from compat.text_cut import shorten
from compat.wording import plural
from dashboards.sources import source_link
from dashboards.status_style import legend, status_cell, style_for

TEMPLATES_DIR = Path(__file__).parent / "templates"

# Top navigation: (path, label); the page's own entry gets aria-current="page".
NAV: tuple[tuple[str, str], ...] = (
    ("/", "Overview"),
    ("/matrix", "Matrix"),
    ("/blockers", "Op blockers"),
    ("/runs", "Runs"),
    ("/models", "Models"),
    ("/submit", "Submit a model"),
)


def pct(value: float | None, digits: int = 1) -> str:
    """A ratio 0..1 as a percentage string; '–' when undefined (no architectures in the denominator)."""
    if value is None:
        return "–"
    return f"{value * 100:.{digits}f}%"


def ratio(num: int, den: int) -> float | None:
    return None if not den else num / den


def when(value: datetime | None) -> str:
    """A timestamp as 'YYYY-MM-DD HH:MM UTC' (stored times are UTC; SQLite may drop the tzinfo)."""
    if value is None:
        return "–"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def error_text(message: str | None, bound: int = 300) -> str:
    """An error message for a table cell: whole, or cut at a sentence end (``compat.text_cut``) and marked […]; the
    log link and the API carry all of it."""
    text, cut = shorten(message or "", bound)
    return f"{text} […]" if cut else text


def ticks(text: str | None) -> Markup:
    """Text whose `backticked` names (a switch subject: "`_grouped_mm` 128-alignment") are shown as code, not as
    literal backticks; everything else escaped."""
    parts = str(text or "").split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: nothing is code
        return Markup(escape(str(text or "")))
    return Markup("".join(str(escape(p)) if i % 2 == 0 else f"<code>{escape(p)}</code>" for i, p in enumerate(parts)))


def short_id(run_id: str | None) -> str:
    return (run_id or "")[:8]


def _build_env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(["html", "svg"]),
        undefined=StrictUndefined,  # a missing variable is a bug, not an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,  # templates ship with the package; skip the per-render mtime check
    )
    env.filters.update(pct=pct, when=when, duration=duration, short_id=short_id, error_text=error_text, plural=plural,
                       ticks=ticks, source_link=source_link, op_dtypes=op_dtypes)
    env.globals.update(status_cell=status_cell, style_for=style_for, status_legend=legend, nav=NAV, ratio=ratio)
    return env


ENV = _build_env()


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render ``template`` with the request's path (for the active nav entry) and ``context``."""
    html = ENV.get_template(template).render(request_path=request.url.path, request=request, **context)
    return HTMLResponse(html, status_code=status_code)


def not_found(request: Request, what: str, message: str, back_href: str = "/", back_label: str = "Back to the overview"
              ) -> HTMLResponse:
    """The 404 page: what was not found, why, and where to go back to."""
    return render(request, "not_found.html", status_code=404, page_title=f"{what} not found", message=message,
                  back_href=back_href, back_label=back_label)


def refused(request: Request, what: str, message: str, back_href: str = "/", back_label: str = "Back to the overview"
            ) -> HTMLResponse:
    """The 422 page: a query value the API would refuse too (same words), and where to go back to."""
    return render(request, "not_found.html", status_code=422, page_title=f"{what} not valid", message=message,
                  back_href=back_href, back_label=back_label)
