"""Shared helpers of the dashboard tests (importable by name; conftest.py is not): the live uvicorn server,
the app factory with a recording submission hook, and a Playwright page that records every request."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM = Path("/usr/bin/chromium")
# A closed network: nothing in the browser may phone home, so any request not to 127.0.0.1 is our page's fault.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EnqueueRecorder:
    """Stands in for the worker hook so submission tests decide when a submission's state moves on."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []

    def __call__(self, submission_id: int, database_url: str) -> None:
        self.calls.append((submission_id, database_url))


def make_app(database_url: str):  # noqa: ANN201 - FastAPI
    """The deployed composition (service + pages), with submissions recorded instead of run."""
    from compat.settings import Settings
    from dashboards.views import mount_pages
    from service.app import create_app

    return create_app(Settings(database_url=database_url), enqueue_submission=EnqueueRecorder(), pages=mount_pages)


class LiveServer:
    """uvicorn serving ``app`` in a daemon thread; stopped at session end."""

    def __init__(self, app) -> None:  # noqa: ANN001 - FastAPI
        import uvicorn

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class RecordedPage:
    """A Playwright page plus every URL it requested (to prove the page never left 127.0.0.1)."""

    def __init__(self, page, base_url: str) -> None:  # noqa: ANN001 - playwright Page
        self.page = page
        self.base = base_url
        self.requests: list[str] = []
        self.console_errors: list[str] = []
        page.on("request", lambda req: self.requests.append(req.url))
        page.on("console", lambda msg: self.console_errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda err: self.console_errors.append(str(err)))

    def goto(self, path: str):  # noqa: ANN201 - playwright Response
        return self.page.goto(self.base + path, wait_until="load")

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def foreign_requests(self) -> list[str]:
        return [u for u in self.requests if urlsplit(u).hostname not in ("127.0.0.1",) and
                not u.startswith(("data:", "about:", "blob:"))]
