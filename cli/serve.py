"""The deployed web app: the service's API with the dashboard's pages, and submissions run by the harness.

The composition the service cannot do itself (it imports neither the pages' package nor the harness):
``uvicorn cli.serve:create_app --factory`` (compose's api service) and ``compat serve`` run it.
"""

from __future__ import annotations

import errno
import socket

import uvicorn
from fastapi import FastAPI

from cli.console import console, fail
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


PORT_HINT = "pass --port N or set COMPAT_PORT"
MAKE_PORT_HINT = "pass PORT=N to make, e.g. make run PORT=8001"  # make passes PORT, never COMPAT_PORT, to compat


def listen(host: str, port: int, hint: str = PORT_HINT) -> socket.socket:
    """The server's socket, bound as uvicorn binds one (SO_REUSEADDR; IPv6 for an address with a colon). A port in
    use is one line naming it and how to choose another (``hint``; exit 2), never uvicorn's errno."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise fail(f"port {port} on {host} is in use: {hint}") from None
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} (--host, --port; COMPAT_HOST, "
                   "COMPAT_PORT)") from None
    return sock


def check_port(host: str | None, port: int | None, hint: str = PORT_HINT) -> None:
    """Only whether the server could listen on ``host:port`` now (``make run`` asks before its minutes-long sweep)."""
    settings = get_settings()
    listen(host or settings.host, port or settings.port, hint).close()


def serve(host: str | None = None, port: int | None = None, hint: str = PORT_HINT) -> None:
    """``compat serve``: the app with uvicorn, after migrating the database (fail here, loudly, not on a request).
    uvicorn serves on the socket bound here, so no other process can take the port between the check and the
    start (uvicorn would exit with an errno)."""
    settings = get_settings()
    host, port = host or settings.host, port or settings.port
    db_upgrade(settings.database_url)
    sock = listen(host, port, hint)
    server = uvicorn.Server(uvicorn.Config(FACTORY, factory=True, host=host, port=port, log_level="info"))
    # uvicorn names the address only when it binds it itself.
    console.print(f"serving on http://{f'[{host}]' if ':' in host else host}:{port} (Ctrl-C to stop)",
                  highlight=False)
    with sock:
        server.run(sockets=[sock])
    if not server.started:  # startup failed (uvicorn logged why): as `uvicorn.run` ends then
        raise fail(f"the server on {host}:{port} did not start (its log above says why)", 1)
