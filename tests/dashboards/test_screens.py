"""Every page renders in headless Chromium without script errors or foreign requests; screenshots saved."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PAGES = [
    ("overview", "/"),
    ("matrix", "/matrix"),
    ("architecture", "/architectures/MixtralForCausalLM"),
    ("blockers", "/blockers"),
    ("runs", "/runs"),
    ("submit", "/submit"),
    ("run", "/runs/{neuron_latest}"),
    ("diff", "/runs/diff?a={neuron_prev}&b={neuron_latest}"),
]


@pytest.mark.parametrize(("name", "path"), PAGES)
def test_page_renders(page, run_ids, name: str, path: str) -> None:  # noqa: ANN001
    resp = page.goto(path.format(**run_ids))
    assert resp.status == 200
    assert page.page.locator("h1").count() == 1
    page.shot(name)
    assert page.console_errors == []
