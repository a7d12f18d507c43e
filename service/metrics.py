"""Prometheus metrics of the service: request counts and latencies per route, served at ``/metrics``.

Each app gets its own registry so several apps (tests) in one process never clash.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Receive, Scope, Send


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("compat_http_requests_total", "HTTP requests", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("compat_http_request_seconds", "HTTP request latency", ["method", "route"],
                                 registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5))


class MetricsMiddleware:
    """Pure ASGI middleware (no BaseHTTPMiddleware: it would add latency and break streaming)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def _send(message) -> None:  # noqa: ANN001
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, _send)
        finally:
            # The route template, not the raw path, keeps label cardinality bounded. FastAPI keeps the
            # prefixed template of an included router in its effective route context.
            ctx = (scope.get("fastapi") or {}).get("effective_route_context")
            name = getattr(ctx, "path", None) or getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.requests.labels(scope["method"], name, str(status["code"])).inc()
            self.metrics.latency.labels(scope["method"], name).observe(time.perf_counter() - start)
