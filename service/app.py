"""FastAPI app factory: REST API under /api/v1 (schema at /openapi.json), /healthz, /metrics; pages and the
submission runner are handed in by the caller (``cli.serve`` composes the deployed app).

Every error leaves as a JSON body ({"error", "detail"}); the catch-all handler keeps even bugs out of HTML.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from compat.settings import Settings, get_settings
from service import db, log_redaction
from service.api import badges, exports, models, results, submissions
from service.metrics import Metrics, MetricsMiddleware
from service.queries import NotFound
from service.submissions import HubConfig
from service.validation import InvalidInput

log = logging.getLogger(__name__)
API_PREFIX = "/api/v1"

# Starts a stored submission's run in the background: (submission id, database URL) -> None, returns at once.
EnqueueSubmission = Callable[[int, str], None]
# Adds routes to the app (the dashboard's pages and their static files).
Mount = Callable[[FastAPI], None]


class BodyLimit:
    """Refuse request bodies far above the upload cap before parsing them (413, JSON)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.limit):
                resp = JSONResponse({"error": "request body too large", "detail": {"limit_bytes": self.limit}},
                                    status_code=413)
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        msg = exc.detail if isinstance(exc.detail, str) else {401: "unauthorized", 422: "invalid request"}.get(
            exc.status_code, "error")
        return JSONResponse({"error": msg, "detail": jsonable_encoder(exc.detail)}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
        loc = errors[0]["loc"] if errors and errors[0].get("loc") else ()
        field = str(loc[-1]) if loc else None
        return JSONResponse({"error": f"invalid {field}" if field else "invalid request", "field": field,
                             "detail": jsonable_encoder(errors)}, status_code=422)

    @app.exception_handler(InvalidInput)
    async def invalid_input(_: Request, exc: InvalidInput) -> JSONResponse:
        return JSONResponse({"error": exc.message, "field": exc.field,
                             "detail": [{"loc": ["body", exc.field], "msg": exc.message, "type": "invalid"}]},
                            status_code=422)

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"error": str(exc), "detail": None}, status_code=404)

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse({"error": "internal error", "detail": type(exc).__name__}, status_code=500)


def create_app(settings: Settings | None = None, *, migrate: bool = True,
               enqueue_submission: EnqueueSubmission | None = None, pages: Mount | None = None,
               hub_config: HubConfig | None = None) -> FastAPI:
    """The service over ``settings.database_url`` (migrated to head unless ``migrate=False``).

    ``enqueue_submission`` starts a submission's run; without one, submissions are stored ``queued`` for a runner
    elsewhere. ``pages`` mounts the dashboard. ``hub_config`` reads a Hub repo's config.json, to check that an
    uploaded config is the repo's it names; without one that check is skipped and noted on the submission. The
    service itself imports neither the harness nor the pages."""
    settings = settings or get_settings()
    # Here, not in `compat serve`: compose runs uvicorn on this factory directly; uvicorn has configured its loggers
    # before it calls the factory, and keeps the filters it finds.
    log_redaction.install()
    if migrate:
        db.upgrade(settings.database_url)
    # Swagger UI and ReDoc load their scripts and styles from CDNs and FastAPI ships no local copy: they would be
    # blank pages offline, so they are off. The schema itself stays at /openapi.json.
    app = FastAPI(title="neuron-compat", version="1", summary="Which Hugging Face causal-LM architectures run "
                  "correctly on a PyTorch device, and why the rest fail.", docs_url=None, redoc_url=None)
    app.state.settings = settings  # the app's one settings source, for the API and the pages (service.deps)
    app.state.enqueue_submission = enqueue_submission
    app.state.hub_config = hub_config
    if enqueue_submission is None:
        log.info("no submission runner attached: submissions are stored queued")
    metrics = Metrics()
    app.state.metrics = metrics
    _install_error_handlers(app)
    for module in (results, exports, badges, submissions, models):
        app.include_router(module.router, prefix=API_PREFIX)

    @app.get("/healthz", tags=["ops"], summary="Liveness and database reachability")
    def healthz() -> dict[str, str]:
        with db.get_engine(settings.database_url).connect() as conn:
            conn.execute(text("SELECT 1"))
        return {"status": "ok", "database": "ok"}

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse, summary="Prometheus metrics")
    def metrics_endpoint() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    if pages is not None:
        pages(app)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    # The multipart envelope adds a little around the file itself.
    app.add_middleware(BodyLimit, limit=settings.max_upload_bytes + 16 * 1024)
    return app
