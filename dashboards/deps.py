"""Request-scoped plumbing shared by the page modules: the DB session dependency and the 404 page.

Sessions come from ``service.db`` on the app's database URL (``app.state.database_url``, else the settings').
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from dashboards.templating import render
from service import db


def get_session(request: Request) -> Iterator[Session]:
    """One read session per page request, closed afterwards (pages never write through it)."""
    url = getattr(request.app.state, "database_url", None)
    session = db.session_factory(url)()
    try:
        yield session
    finally:
        session.close()


def not_found(request: Request, what: str, message: str, back_href: str = "/", back_label: str = "Back to the overview"
              ) -> HTMLResponse:
    return render(request, "not_found.html", status_code=404, page_title=f"{what} not found", message=message,
                  back_href=back_href, back_label=back_label)
