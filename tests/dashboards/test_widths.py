"""Every page at a laptop's 1280 px and a phone's 390 px in headless Chromium (issue 30, item 6): the page never
scrolls sideways, no table cell's content overflows the cell, and at 1280 px every table fits its page whole.

A table wider than a phone scrolls inside its own frame (``.table-wrap``), never the page; the overview's, the
architecture's and the blockers' pages are screenshotted at both widths (test-artifacts/screenshots/, the copies
in docs/img/ come from here)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live_server import RecordedPage

pytestmark = pytest.mark.browser

PAGES = [
    ("overview", "/"),
    ("matrix", "/matrix"),
    ("architecture", "/architectures/MixtralForCausalLM"),
    ("architecture-fallback", "/architectures/LlamaForCausalLM"),
    ("blockers", "/blockers"),
    ("runs", "/runs"),
    ("submit", "/submit"),
    ("run", "/runs/{neuron_latest}"),
    ("diff", "/runs/diff?a={neuron_prev}&b={neuron_latest}"),
]
WIDTHS = [1280, 390]
# Cells that overflow their page or their own box, as (tag, first words, how): empty when the page reads whole.
OVERFLOWS = """(fitWhole) => {
  const out = [], page = document.documentElement.clientWidth;
  for (const cell of document.querySelectorAll('td, th')) {
    const r = cell.getBoundingClientRect();
    if (r.width === 0) continue;  // hidden (screen-reader captions)
    const words = cell.innerText.trim().slice(0, 40);
    if (cell.scrollWidth > cell.clientWidth + 1) out.push([cell.tagName, words, 'content wider than its cell']);
    const frame = cell.closest('.table-wrap');
    if (fitWhole && r.right > page + 1) out.push([cell.tagName, words, 'past the page edge']);
    if (!fitWhole && !frame && r.right > page + 1) out.push([cell.tagName, words, 'past the page, unframed']);
  }
  return out;
}"""


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def sized(request, browser, live) -> Iterator[tuple[RecordedPage, int]]:  # noqa: ANN001
    width = request.param
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=live.url)
    rp = RecordedPage(context.new_page(), live.url)
    yield rp, width
    context.close()
    assert rp.foreign_requests() == []


@pytest.mark.parametrize(("name", "path"), PAGES)
def test_no_table_cell_overflows_its_page(sized, run_ids, name: str, path: str) -> None:  # noqa: ANN001
    page, width = sized
    assert page.goto(path.format(**run_ids)).status == 200
    # The page itself never scrolls sideways, at either width.
    assert page.page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    # The matrix is a wide grid by nature: it scrolls in its frame at 1280 px too; every other table fits whole.
    fit_whole = width >= 1280 and name != "matrix"
    assert page.page.evaluate(OVERFLOWS, fit_whole) == []
    if name in ("overview", "architecture", "architecture-fallback", "blockers"):
        page.shot(f"{name}-{width}")
    assert page.console_errors == []


def test_the_range_has_its_own_line_and_the_sources_are_valid_links(page) -> None:  # noqa: ANN001
    page.goto("/")
    api = page.page.request.get(page.base + "/api/v1/coverage").json()["items"]
    neuron = next(c for c in api if c["device"] == "neuron")
    singles = sum(1 for d in neuron["decisions"] if len(d["switches"]) == 1)
    line = page.page.locator('[data-device="neuron"] [data-metric="range"]').inner_text()
    assert line == f"{neuron['range_low']}–{neuron['range_high']} depending on {singles} modelling decisions"
    table = page.page.locator('table[data-decisions="neuron"]')
    assert "`" not in table.inner_text()  # subjects show code as code, not as backticks
    hrefs = table.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert hrefs and all(h.startswith("https://") and " " not in h and "(" not in h for h in hrefs), hrefs
    assert "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html" in hrefs


def test_the_verdict_pill_says_natively_or_with_cpu_fallback(page) -> None:  # noqa: ANN001
    page.goto("/architectures/LlamaForCausalLM")
    pill = page.page.locator('[data-device="neuron"] [data-supported]')
    api = page.page.request.get(page.base + "/api/v1/architectures/LlamaForCausalLM").json()
    assert " ".join(pill.inner_text().split()) == ("✓ supported with CPU fallback"
                                         if api["verdicts"]["neuron"].startswith("supported with CPU fallback")
                                         else "✓ supported natively")
    # Same size as the native pill: the fallback is not small print.
    assert pill.evaluate("e => getComputedStyle(e).fontSize") == "17px"


def test_a_known_error_is_shown_once_per_architecture(page) -> None:  # noqa: ANN001
    page.goto("/architectures/MixtralForCausalLM")
    text = page.page.locator("main").inner_text()
    first_line = "'aten::histc' is not implemented for 'Long' on neuron."
    assert text.count(first_line) == 1, text  # was 4 times: the blocker panel and three checks
    assert page.page.locator("[data-error-ref]").count() == 3
