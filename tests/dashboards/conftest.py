"""Fixtures of the dashboard tests: a seeded temporary SQLite store, the real app served by uvicorn on
127.0.0.1, and Debian's headless Chromium driven by Playwright with every request recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live_server import CHROMIUM, CHROMIUM_ARGS, LiveServer, RecordedPage, make_app
from seed_store import seed_sweep


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """(database URL, run ids by name) of a store holding the seeded sweep."""
    from service.store import Store

    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'compat.db'}"
    return url, seed_sweep(Store(url))


@pytest.fixture(scope="session")
def live(seeded: tuple[str, dict[str, str]]) -> Iterator[LiveServer]:
    url, _ = seeded
    with LiveServer(make_app(url)) as server:
        yield server


@pytest.fixture(scope="session")
def database_url(seeded: tuple[str, dict[str, str]]) -> str:
    return seeded[0]


@pytest.fixture(scope="session")
def run_ids(seeded: tuple[str, dict[str, str]]) -> dict[str, str]:
    return seeded[1]


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip(f"BROWSER TESTS SKIPPED: {CHROMIUM} not installed (run `make browser-deps` or "
                    "`apt-get install chromium`)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, live: LiveServer) -> Iterator[RecordedPage]:  # noqa: ANN001
    context = browser.new_context(viewport={"width": 1366, "height": 900}, base_url=live.url)
    rp = RecordedPage(context.new_page(), live.url)
    yield rp
    context.close()
    # Every test doubles as a closed-network check.
    assert rp.foreign_requests() == [], f"requests left 127.0.0.1: {rp.foreign_requests()}"

