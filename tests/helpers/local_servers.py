"""HTTP servers the notification tests start on 127.0.0.1: a capture server (records each request; can answer with
an error or late) and a fake GitHub issues API (in memory). No test reaches a real webhook or GitHub.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class _Server(ThreadingHTTPServer):
    daemon_threads = True


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], state: Any) -> Iterator[str]:
    """Serve ``handler`` (which reads ``self.server.state``) on a free port of 127.0.0.1; yields the base URL."""
    srv = _Server(("127.0.0.1", 0), handler)
    srv.state = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def closed_port_url() -> str:
    """A URL of 127.0.0.1 where nothing listens (a down endpoint): the port was bound, then released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


class Capture:
    """What the capture server saw, and how it answers: ``status`` (e.g. 500 for a failing endpoint) after
    ``delay_s`` (longer than the client's timeout: a slow endpoint)."""

    def __init__(self, status: int = 200, delay_s: float = 0.0, reply: bytes = b"ok") -> None:
        self.status, self.delay_s, self.reply = status, delay_s, reply
        self.requests: list[dict[str, Any]] = []


class CaptureHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        state: Capture = self.server.state  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        state.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(raw or b"null")})
        time.sleep(state.delay_s)
        try:
            self.send_response(state.status)
            self.end_headers()
            self.wfile.write(state.reply)
        except OSError:  # the client gave up waiting (a slow-endpoint test)
            pass

    def log_message(self, *_: Any) -> None:
        pass


class FakeGitHub:
    """Issues of one repository, as GitHub's REST API shapes them (the fields the client reads)."""

    def __init__(self, repo: str, token: str) -> None:
        self.repo, self.token = repo, token
        self.issues: dict[int, dict[str, Any]] = {}
        self.comments: dict[int, list[str]] = {}
        self.calls: list[tuple[str, str]] = []
        self.unauthorized = 0

    def add(self, title: str, body: str, labels: list[str], state: str = "open") -> int:
        number = len(self.issues) + 1
        self.issues[number] = {"number": number, "title": title, "body": body, "state": state,
                               "labels": [{"name": n} for n in labels]}
        self.comments[number] = []
        return number


class GitHubHandler(BaseHTTPRequestHandler):
    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        gh: FakeGitHub = self.server.state  # type: ignore[attr-defined]
        gh.calls.append((method, self.path))
        if self.headers.get("Authorization") != f"Bearer {gh.token}":
            gh.unauthorized += 1
            return self._reply(401, {"message": "Bad credentials"})
        url = urlsplit(self.path)
        prefix = f"/repos/{gh.repo}/issues"
        if not url.path.startswith(prefix):
            return self._reply(404, {"message": "Not Found"})
        rest = url.path[len(prefix):].strip("/").split("/") if url.path != prefix else []
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw) if raw else {}
        if method == "GET" and not rest:
            q = parse_qs(url.query)
            label = q.get("labels", [""])[0]
            rows = [i for i in gh.issues.values() if i["state"] == q.get("state", ["open"])[0]
                    and (not label or label in {lb["name"] for lb in i["labels"]})]
            return self._reply(200, rows)
        if method == "POST" and not rest:
            return self._reply(201, gh.issues[gh.add(body["title"], body["body"], body.get("labels", []))])
        number = int(rest[0])
        if number not in gh.issues:
            return self._reply(404, {"message": "Not Found"})
        if method == "POST" and rest[1:] == ["comments"]:
            gh.comments[number].append(body["body"])
            return self._reply(201, {"body": body["body"]})
        if method == "PATCH" and len(rest) == 1:
            gh.issues[number].update({k: v for k, v in body.items() if k in ("state", "body", "title")})
            return self._reply(200, gh.issues[number])
        return self._reply(404, {"message": "Not Found"})

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._route("PATCH")

    def log_message(self, *_: Any) -> None:
        pass
