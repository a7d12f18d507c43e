"""Credentials never reach a log (issue 19): a token sent in a query string is refused (422) and, since the app
factory installs ``service.log_redaction``, never written to uvicorn's access or error log either.

One test serves the deployed app as compose does (``uvicorn cli.serve:create_app --factory``) and reads its log.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from served import stop, wait_until_healthy
from uvicorn.logging import AccessFormatter, DefaultFormatter

from compat.settings import Settings
from service.app import create_app
from service.log_redaction import REDACTED, redact

SECRET = "compat_" + "Zx9" * 12
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("line", "kept"), [
    (f"/api/v1/runs?token={SECRET}&page=2", "/api/v1/runs?token=[redacted]&page=2"),
    ("/x?a=1&ACCESS_TOKEN=abc;Api_Key=def&key=ghi#f", "/x?a=1&ACCESS_TOKEN=[redacted];Api_Key=[redacted]&key=[redacted]#f"),
    ("/x?monkey=1&keys=2&tokens=3", "/x?monkey=1&keys=2&tokens=3"),  # only those names, whole
    (f"Authorization: Bearer {SECRET}", "Authorization: Bearer [redacted]"),
    ("{'authorization': 'Basic dXNlcjpwYXNzd29yZA=='}", "{'authorization': 'Basic [redacted]'}"),
    (f"sent {SECRET} twice", "sent [redacted] twice"),
    ("missing bearer token", "missing bearer token"),
])
def test_redact(line: str, kept: str) -> None:
    assert redact(line) == kept


@pytest.fixture
def captured(sqlite_url: str):  # noqa: ANN201
    """uvicorn's two loggers at INFO, formatted by uvicorn's own formatters into one buffer, after the app factory."""
    create_app(Settings(database_url=sqlite_url))
    buf = io.StringIO()
    saved = []
    for name, fmt in (("uvicorn.access", AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s')),
                      ("uvicorn.error", DefaultFormatter("%(message)s"))):
        logger = logging.getLogger(name)
        handler = logging.StreamHandler(buf)
        handler.setFormatter(fmt)
        saved.append((logger, handler, logger.level))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield buf
    for logger, handler, level in saved:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_the_access_and_error_records_are_redacted_in_uvicorns_format(captured: io.StringIO) -> None:
    # Exactly the call uvicorn's h11/httptools protocols make for each response.
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET",
                                             f"/api/v1/runs?token={SECRET}", "1.1", 422)
    logging.getLogger("uvicorn.error").error("Exception in ASGI application: headers %s",
                                             {"authorization": f"Bearer {SECRET}"})
    out = captured.getvalue()
    assert SECRET not in out
    assert f'127.0.0.1:5000 - "GET /api/v1/runs?token={REDACTED} HTTP/1.1" 422 Unprocessable Entity' in out
    assert "'authorization': 'Bearer [redacted]'" in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_deployed_apps_access_log_never_holds_a_token(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
           "COMPAT_VAR_DIR": str(tmp_path / "var")}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "cli.serve:create_app", "--factory", "--host",
                             "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(proc, base, "the app")
        refused = httpx.get(f"{base}/api/v1/runs", params={"token": SECRET, "Access_Token": SECRET}, timeout=10)
        assert refused.status_code == 422  # a token in the query string is refused ...
        httpx.post(f"{base}/api/v1/submissions?api_key={SECRET}", headers={"Authorization": f"Bearer {SECRET}"},
                   data={"model_id": "org/m"}, timeout=10)
    finally:
        out = stop(proc)
    assert "GET /api/v1/runs?token=[redacted]&Access_Token=[redacted] HTTP/1.1" in out, out  # ... and not logged
    assert "POST /api/v1/submissions?api_key=[redacted]" in out, out
    assert SECRET not in out
