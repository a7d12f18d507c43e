"""The numbers a user reads on the overview equal the REST API's JSON (same queries, one truth)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def _api(page, path: str) -> dict:  # noqa: ANN001
    resp = page.page.request.get(page.base + path)
    assert resp.status == 200, path
    return resp.json()


def _frac_text(supported: int, total: int, fraction: float) -> str:
    # The page shows one decimal; the API's fraction is rounded to 4 places: same number, two roundings.
    return f"{supported} / {total} ({fraction * 100:.1f}%)"


def test_headline_equals_api(page) -> None:  # noqa: ANN001
    page.goto("/")
    top_n = 100  # the settings' default dashboard_top_n
    all_api = {c["device"]: c for c in _api(page, "/api/v1/coverage")["items"]}
    top_api = {c["device"]: c for c in _api(page, f"/api/v1/coverage?top_n={top_n}")["items"]}
    cards = page.page.locator("article.card[data-device]")
    assert sorted(cards.evaluate_all("els => els.map(e => e.dataset.device)")) == sorted(all_api)
    assert cards.first.get_attribute("data-device") == "neuron", "the device under test leads"
    for device, api in all_api.items():
        card = page.page.locator(f'article.card[data-device="{device}"]')
        assert card.locator('[data-metric="all"]').inner_text() == _frac_text(
            api["supported"], api["total"], api["fraction"])
        for pc in api["per_check"]:
            assert card.locator(f'[data-metric="check-{pc["check"]}"]').inner_text() == _frac_text(
                pc["passed"], pc["total"], pc["fraction"])
        top = top_api[device]
        # One spelling of a share everywhere (compat.results.percent): the CLI prints the same "57.1%".
        assert card.locator('[data-headline="top"]').inner_text().startswith(f"{top['percent']} ")
        assert card.locator('[data-metric="top"]').inner_text() == f"{top['supported']} / {top['total']}"
    # The seeded sweep: 8 of 14 supported on neuron in the latest nightly run.
    assert all_api["neuron"]["supported"] == 8 and all_api["neuron"]["total"] == 14


def test_declared_rows_equal_api(page) -> None:  # noqa: ANN001
    page.goto("/")
    api = _api(page, "/api/v1/coverage/declared?top_n=100")
    assert api["rows"], "expected the shipped declared list and the measured devices"
    for row in api["rows"]:
        tr = page.page.locator(f'tr[data-row="{row["kind"]}:{row["name"]}"]')
        cells = tr.locator("td.num").all_inner_texts()
        assert cells == [str(row["supported"]), str(row["total"]), f"{row['fraction'] * 100:.1f}%"]
        if row["kind"] == "declared":
            assert "declared, not measured" in tr.inner_text()


def test_regressions_and_fixes_since_previous_run(page, run_ids) -> None:  # noqa: ANN001
    page.goto("/")
    diff = _api(page, f"/api/v1/diff?a={run_ids['neuron_prev']}&b={run_ids['neuron_latest']}")
    shown_reg = page.page.locator('[data-change="regression"]').all_inner_texts()
    shown_fix = page.page.locator('[data-change="fix"]').all_inner_texts()
    # One regression rule with the nightly gate: GPT2's train check went pass -> oom, Phi3's forward pass -> mismatch.
    assert shown_reg == [e["architecture"] for e in diff["regressions"]] == ["GPT2LMHeadModel", "Phi3ForCausalLM"]
    assert shown_fix == [e["architecture"] for e in diff["fixes"]] == ["FalconForCausalLM"]
    # The chart describes the latest value of every device in text, not only in pixels.
    label = page.page.locator("svg.chart").get_attribute("aria-label")
    assert "neuron 57.1%" in label and "cpu 92.9%" in label
