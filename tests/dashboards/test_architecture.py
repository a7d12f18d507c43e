"""The architecture page: blocking op and error, changes highlighted, history, reproducer, log, badge; 404s."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_shows_blocking_op_error_and_history(page, run_ids) -> None:  # noqa: ANN001
    page.goto("/architectures/MixtralForCausalLM")
    api = page.page.request.get(page.base + "/api/v1/architectures/MixtralForCausalLM").json()
    assert api["blocking_op"] == "aten::histc (Long)"
    assert page.page.locator("[data-blocking-op]").inner_text() == api["blocking_op"]
    row = page.page.locator('tr[data-check="neuron:forward"]')
    assert "aten::histc (Long)" in row.inner_text() and "NotImplementedError" in row.inner_text()
    assert page.page.locator('[data-device="neuron"] [data-supported]').get_attribute("data-supported") == "no"
    assert page.page.locator('[data-device="cpu"] [data-supported]').get_attribute("data-supported") == "yes"
    # History: one row per (run, device) the API reports, newest first.
    history_runs = page.page.locator("h2:text('History across catalog sweeps') + .table-wrap tbody tr td:first-child a")
    assert history_runs.evaluate_all("els => els.map(e => e.getAttribute('href').split('/').pop())") == [
        h["run_id"] for h in api["history"]]
    assert set(run_ids.values()) == {h["run_id"] for h in api["history"]}


def test_changed_status_highlighted_everywhere(page) -> None:  # noqa: ANN001
    page.goto("/architectures/Phi3ForCausalLM")
    latest = page.page.locator('tr[data-check="neuron:forward"] .st')
    assert latest.get_attribute("data-status") == "mismatch" and "st-changed" in latest.get_attribute("class")
    assert page.page.locator('tr[data-check="neuron:load"] .st-changed').count() == 0
    # In the history, only the newest neuron run's forward cell changed.
    assert page.page.locator("table").last.locator(".st-changed").count() == 1
    page.shot("architecture-changed")


def test_reproducer_copy_log_and_badge(page, run_ids) -> None:  # noqa: ANN001
    page.goto("/architectures/MixtralForCausalLM")
    repro = page.page.locator("#repro-cmd").inner_text()
    assert repro.startswith("compat repro MixtralForCausalLM --device neuron")
    page.page.get_by_role("button", name="Copy the reproducer command").click()
    page.page.wait_for_selector("button[data-copied]")
    badge = page.page.locator("#badge-md").inner_text()
    assert badge.startswith("[![neuron-compat: MixtralForCausalLM](") and "/api/v1/badges/MixtralForCausalLM.svg" in badge
    assert page.page.locator("img[alt^='Current badge']").evaluate("img => img.naturalWidth") > 0
    with page.page.expect_navigation():
        page.page.locator(f'a[data-log-link][href*="{run_ids["neuron_latest"]}"]').click()
    assert page.page.locator("h1").inner_text() == "Captured log: MixtralForCausalLM"
    assert "MixtralForCausalLM forward on neuron: unsupported_op" in page.page.locator("pre").all_inner_texts()[1]
    page.shot("log")


def test_unknown_architecture_is_a_404_page(page) -> None:  # noqa: ANN001
    resp = page.goto("/architectures/NoSuchForCausalLM")
    assert resp.status == 404
    assert page.page.locator("h1").inner_text() == "Architecture not found"
    assert "NoSuchForCausalLM" in page.page.locator("main").inner_text()
    page.shot("architecture-404")
