"""Empty and in-progress states: no runs yet (the one command to run), a run in progress (progress that
updates as results arrive), served by a second app over its own database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from live_server import LiveServer, make_app

from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Check, DeviceInfo, ResultRecord, RunInfo, Status

pytestmark = pytest.mark.browser


@pytest.fixture
def fresh(tmp_path, browser):  # noqa: ANN001, ANN201
    """(store, recorded page) over an empty database served on its own port."""
    from live_server import RecordedPage

    from service.store import Store

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    store = Store(url)
    with LiveServer(make_app(url)) as server:
        context = browser.new_context(viewport={"width": 1366, "height": 900})
        rp = RecordedPage(context.new_page(), server.url)
        yield store, rp
        context.close()
        assert rp.foreign_requests() == []


def test_no_runs_tells_the_one_command(fresh) -> None:  # noqa: ANN001
    _, page = fresh
    page.goto("/")
    assert page.page.locator("h1").inner_text() == "No runs yet"
    assert page.page.locator("#first-command").inner_text() == "compat sweep"
    page.shot("empty")


def test_run_in_progress_shows_progress(fresh) -> None:  # noqa: ANN001
    store, page = fresh
    archs = [ArchitectureEntry(name=f"Arch{i}ForCausalLM", model_type=f"a{i}", rank=i + 1) for i in range(5)]
    run = RunInfo(device=DeviceInfo(name="neuron", simulated=True), started=datetime.now(UTC))
    store.start_run(run, archs, [(a.name, "neuron", str(c)) for a in archs for c in DEFAULT_CHECKS])

    def deliver(arch: ArchitectureEntry) -> None:
        store.add_results(run.id, [ResultRecord(architecture=arch.name, rank=arch.rank, device="neuron", check=c,
                                                status=Status.PASS) for c in DEFAULT_CHECKS])

    deliver(archs[0])
    page.goto("/")
    banner = page.page.get_by_label("Run in progress")
    assert "4 of 20 results" in banner.inner_text()
    page.shot("overview-running")
    page.goto(f"/runs/{run.id}")
    bar = page.page.get_by_role("progressbar", name="Run progress")
    assert bar.get_attribute("aria-valuenow") == "20.0"
    deliver(archs[1])  # the page polls: the count moves without a reload
    page.page.wait_for_function("document.querySelector('[data-field=results]').textContent === '8'", timeout=10_000)
    for a in archs[2:]:
        deliver(a)
    store.finish_run(run.id)
    # Final state: the page reloads itself and shows the finished run.
    page.page.wait_for_selector("text=complete", timeout=10_000)
    assert page.page.get_by_role("progressbar", name="Run progress").count() == 0
    assert Check.LOAD in DEFAULT_CHECKS
