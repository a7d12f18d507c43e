"""The deployed web app: the service's API with the dashboard's pages, and submissions run by the harness.

The composition the service cannot do itself (it imports neither the pages' package nor the harness):
``uvicorn cli.serve:create_app --factory`` (compose's api service) and ``compat serve`` run it.
"""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from compat.settings import Settings, get_settings
from dashboards.views import mount_pages
from service import app as service_app
from service.commands import db_upgrade
from worker.orchestration.submissions import enqueue_submission, hub_config

FACTORY = "cli.serve:create_app"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API and the pages over ``settings``' database; a submission runs through ``enqueue_submission``, and an
    uploaded config sent with a Hub id is checked against that repo's config.json (``hub_config``)."""
    return service_app.create_app(settings, enqueue_submission=enqueue_submission, pages=mount_pages,
                                  hub_config=hub_config)


def serve(host: str | None = None, port: int | None = None) -> None:
    """``compat serve``: the app with uvicorn, after migrating the database (fail here, loudly, not on a request)."""
    settings = get_settings()
    db_upgrade(settings.database_url)
    uvicorn.run(FACTORY, factory=True, host=host or settings.host, port=port or settings.port, log_level="info")
