"""Request-scoped dependencies shared by the API routers and the dashboard pages: the app's settings and its session.

One app has one settings object (``create_app(settings)``, kept on ``app.state``); both read it from here.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request
from sqlalchemy.orm import Session

from compat.settings import Settings
from service import db


def app_settings(request: Request) -> Settings:
    """The settings the app was created with (never the process-global ones)."""
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request on the app's database: committed when the handler returns, rolled back on error."""
    with db.session_scope(app_settings(request).database_url) as session:
        yield session
