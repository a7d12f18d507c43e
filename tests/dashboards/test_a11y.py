"""Basic accessibility on every page: each form control and button has an accessible name, headings descend
one level at a time from a single h1, and images/charts have text alternatives."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PAGES = ["/", "/matrix", "/matrix?status=failing", "/architectures/MixtralForCausalLM", "/blockers", "/runs",
         "/runs/diff?a={neuron_prev}&b={neuron_latest}", "/runs/{neuron_latest}",
         "/runs/{neuron_latest}/log/MixtralForCausalLM", "/submit", "/architectures/Nope"]

# A control's accessible name, by the rules that matter here: <label for>, wrapping label, aria-label(ledby),
# title, or the text of a button/link.
UNLABELLED_JS = """() => {
  const name = el => {
    if (el.getAttribute('aria-label')) return el.getAttribute('aria-label');
    const by = el.getAttribute('aria-labelledby');
    if (by) return by.split(' ').map(id => (document.getElementById(id) || {}).textContent || '').join(' ');
    if (el.labels && el.labels.length) return [...el.labels].map(l => l.textContent).join(' ');
    if (['BUTTON', 'A'].includes(el.tagName)) return el.textContent;
    return el.getAttribute('title') || '';
  };
  const controls = [...document.querySelectorAll('input:not([type=hidden]), select, textarea, button, a[href]')];
  return controls.filter(el => !name(el).trim()).map(el => el.outerHTML.slice(0, 120));
}"""

HEADINGS_JS = "() => [...document.querySelectorAll('h1,h2,h3,h4,h5,h6')].map(h => +h.tagName[1])"


@pytest.mark.parametrize("path", PAGES)
def test_controls_labelled_and_headings_in_order(page, run_ids, path: str) -> None:  # noqa: ANN001
    resp = page.goto(path.format(**run_ids))
    assert resp.status == (404 if path.endswith("/Nope") else 200)
    assert page.page.evaluate(UNLABELLED_JS) == []
    levels = page.page.evaluate(HEADINGS_JS)
    assert levels[0] == 1 and levels.count(1) == 1, levels
    assert all(b <= a + 1 for a, b in zip(levels, levels[1:], strict=False)), f"heading level skipped: {levels}"
    assert page.page.locator("html").get_attribute("lang") == "en"
    for img in page.page.locator("img, svg[role=img]").all():
        assert (img.get_attribute("alt") or img.get_attribute("aria-label") or "").strip()
    if resp.status == 200:  # a 404 page logs its own status as a console error
        assert page.console_errors == []
