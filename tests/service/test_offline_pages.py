"""The product works with no internet: no HTML page of the app (dashboards, API docs) loads a script or a style
from another host, and the CDN-based Swagger UI / ReDoc pages are off while the OpenAPI schema stays served."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

from service_seed import ARCHS, seed

from compat.settings import Settings
from service import db
from service.store import Store
from service.submissions import SubmissionInput, create_submission

LOCAL_HOSTS = {"127.0.0.1", "localhost", "testserver"}
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""")


class _AssetRefs(HTMLParser):
    """URLs an HTML page loads as scripts or styles: script src, link href, and url()/@import in inline CSS."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.refs.append(a["src"])
        elif tag == "link" and a.get("href"):
            self.refs.append(a["href"])
        if a.get("style"):
            self.refs += CSS_URL.findall(a["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.refs += CSS_URL.findall(data)


def _remote(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") or url.startswith("//"):
        return parts.hostname not in LOCAL_HOSTS
    return False


def _get_paths(app) -> list[str]:  # noqa: ANN001 - FastAPI
    """Every GET route's path, routers included (FastAPI keeps included routes behind one entry per router)."""
    paths = []
    for route in app.routes:
        contexts = route.effective_route_contexts() if hasattr(route, "effective_route_contexts") else [route]
        for ctx in contexts:
            methods = getattr(getattr(ctx, "original_route", ctx), "methods", None) or set()
            if "GET" in methods:
                paths.append(ctx.path)
    return paths


def test_no_page_loads_scripts_or_styles_from_another_host(app_factory, sqlite_url: str) -> None:
    from fastapi.testclient import TestClient

    store = Store(sqlite_url)
    run_id = seed(store)
    with db.session_scope(sqlite_url) as s:
        sub_id = create_submission(s, SubmissionInput(model_id="openai-community/gpt2"), submitter="t",
                                   settings=Settings(database_url=sqlite_url)).id
    params = {"run_id": run_id, "org": "meta-llama", "name": ARCHS[0].name, "architecture": ARCHS[0].name, "submission_id": str(sub_id)}
    with TestClient(app_factory()) as client:
        paths = _get_paths(client.app)
        assert {"/", "/matrix", "/submit", "/runs/{run_id}", "/api/v1/coverage"} <= set(paths), paths
        html_pages, local_assets, remote = 0, set(), []
        for path in paths:
            url = re.sub(r"\{(\w+)\}", lambda m: params[m.group(1)], path)
            r = client.get(url)
            if not r.headers.get("content-type", "").startswith("text/html"):
                continue
            html_pages += 1
            parser = _AssetRefs()
            parser.feed(r.text)
            remote += [(url, ref) for ref in parser.refs if _remote(ref)]
            local_assets |= {ref for ref in parser.refs if not _remote(ref) and ref.endswith(".css")}
        assert html_pages >= 8, "the dashboard pages were rendered"
        # A local stylesheet must not pull fonts or imports from elsewhere either.
        for ref in sorted(local_assets):
            css = client.get(ref)
            assert css.status_code == 200, ref
            remote += [(ref, u) for u in CSS_URL.findall(css.text) if _remote(u)]
    assert remote == [], f"pages load assets from other hosts (broken offline): {remote}"


def test_cdn_docs_pages_are_off_and_the_schema_is_served(client) -> None:
    assert client.get("/docs").status_code == 404
    assert client.get("/redoc").status_code == 404
    schema = client.get("/openapi.json")
    assert schema.status_code == 200 and "/api/v1/submissions" in schema.json()["paths"]
