"""Property test over every HTML route of the deployed composition (pages mounted): extreme integers and arbitrary
strings in every path segment and query parameter never produce a server error (issue 13, finding 5).

Schemathesis covers the JSON API from its OpenAPI schema; the pages are outside the schema, so this drives them from
the app's own route table instead.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_seed import seed, times

from compat.results import Status

# Integers at and past every storage boundary (SQLite and PostgreSQL integers, 64-bit offsets), then any size.
BOUNDARIES = [0, -1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, 10**20, 10**30, -(10**30)]
EXTREME_INTS = st.one_of(st.sampled_from(BOUNDARIES), st.integers(min_value=-(10**40), max_value=10**40))
VALUE = st.one_of(EXTREME_INTS.map(str), EXTREME_INTS.map(str), st.text(max_size=40),
                  st.sampled_from(["", "1e309", "nan", "-0", "1.5", "%00", "../", "9" * 5000]))
QUERY_KEYS = ("page", "top", "sort", "order", "q", "status", "device", "check", "a", "b", "per_page", "state",
              "days")
# Every GET page; test_the_fuzzed_routes_are_all_the_pages keeps this list equal to the app's.
PAGES = ["/", "/architectures/{name}", "/blockers", "/matrix", "/models", "/models/{org}/{name}",
         "/regressions", "/runs", "/runs/diff", "/runs/{run_id}",
         "/runs/{run_id}/log/{architecture}", "/runs/{run_id}/progress.json", "/submissions/{submission_id}",
         "/submissions/{submission_id}/status.json", "/submit"]


@pytest.fixture(scope="module")
def pages_client(tmp_path_factory):
    from compat.settings import Settings
    from dashboards.views import mount_pages
    from service.app import create_app
    from service.store import Store

    url = f"sqlite:///{tmp_path_factory.mktemp('pages') / 'compat.db'}"
    store = Store(url)
    t = times(2)
    seed(store, started=t[0])
    seed(store, started=t[1], failing={"MixtralForCausalLM": Status.UNSUPPORTED_OP})
    app = create_app(Settings(database_url=url), enqueue_submission=lambda sid, u: None, pages=mount_pages)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _walk(routes, prefix: str = ""):  # noqa: ANN001, ANN202 - FastAPI route objects
    """(path, methods) of every endpoint, through included routers (FastAPI keeps them nested)."""
    for r in routes:
        if isinstance(r, APIRoute):
            yield prefix + r.path, r.methods
        elif hasattr(r, "original_router"):
            yield from _walk(r.original_router.routes, prefix + r.include_context.prefix)


def _html_get_routes(app) -> list[str]:  # noqa: ANN001 - a FastAPI app
    return sorted({path for path, methods in _walk(app.routes) if "GET" in methods
                   and not path.startswith(("/api/", "/openapi", "/metrics", "/healthz"))})


def test_the_fuzzed_routes_are_all_the_pages(pages_client) -> None:
    assert _html_get_routes(pages_client.app) == sorted(PAGES)


@pytest.mark.parametrize("path", PAGES)
def test_no_html_route_answers_500(pages_client, path: str) -> None:
    @settings(max_examples=40, deadline=None, derandomize=True,  # the same cases every run: no flakes
              suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def fuzz(data) -> None:  # noqa: ANN001
        url = re.sub(r"\{[^}]+\}", lambda _: quote(data.draw(VALUE), safe="") or "x", path)
        params = data.draw(st.dictionaries(st.sampled_from(QUERY_KEYS), VALUE, max_size=3))
        r = pages_client.get(url, params=params)
        assert r.status_code < 500, (url, params, r.status_code, r.text[:300])

    fuzz()
