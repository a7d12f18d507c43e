"""How a result status looks on a page: icon, short text label and CSS class for every ``compat.results.Status``.

Colour is never the only signal: each status carries a distinct glyph and a word, so the matrix reads in greyscale.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from markupsafe import Markup, escape

from compat.ops import op_names
from compat.results import FAILURE_STATUSES, Status


@dataclass(frozen=True)
class StatusStyle:
    """The visual identity of one status."""

    status: str
    icon: str  # a glyph present in DejaVu Sans, the fallback font of headless Debian chromium
    label: str  # short word shown next to the icon
    css: str  # modifier class: colour only reinforces icon + label
    meaning: str  # one sentence, used in the legend and the cell's tooltip


STYLES: dict[str, StatusStyle] = {
    s.status: s
    for s in (
        StatusStyle("pass", "✓", "pass", "st-pass", "ran and matched the CPU reference"),
        StatusStyle("mismatch", "≠", "mismatch", "st-fail", "ran, but numerics differ from the CPU reference"),
        StatusStyle("unsupported_op", "⊘", "op", "st-fail", "the device has no kernel for an op"),
        StatusStyle("unsupported_dtype", "⊗", "dtype", "st-fail", "the op exists, not for this dtype"),
        StatusStyle("oom", "▲", "oom", "st-fail", "ran out of device memory"),
        StatusStyle("error", "✗", "error", "st-fail", "raised an exception"),
        StatusStyle("crash", "☠", "crash", "st-fail", "the worker process died"),
        StatusStyle("timeout", "◷", "timeout", "st-warn", "did not finish in time"),
        StatusStyle("reference_fail", "?", "ref fail", "st-muted", "the CPU reference itself failed"),
        StatusStyle("skipped", "–", "skipped", "st-muted", "not run"),
        StatusStyle("harness_error", "⚙", "harness", "st-muted",
                    "the harness itself failed: neither the device nor the CPU reference is to blame"),
    )
}
assert set(STYLES) == {str(s) for s in Status}, "every Status needs a style"

MISSING = StatusStyle("", "·", "n/a", "st-none", "no result")


def style_for(status: str | Status | None) -> StatusStyle:
    """Style of a status; unknown or absent statuses render as 'n/a' instead of failing the page."""
    if status is None:
        return MISSING
    return STYLES.get(str(status), MISSING)


def is_failure(status: str | Status | None) -> bool:
    """True for statuses that count against the device (reference failures and skips do not)."""
    return status is not None and str(status) in {str(s) for s in FAILURE_STATUSES}


def status_cell(status: str | Status | None, *, changed: bool = False, title: str = "",
                fallback_ops: Iterable[str] | None = None) -> Markup:
    """Inline HTML for one status: glyph + word, with the full meaning (and detail) as tooltip.

    ``fallback_ops`` says where a pass ran (None: not said): none, "pass · native"; else "pass · CPU fallback"
    with every op in the tooltip and the first ones as visible text, e.g. "pass (cpu: argmax)"."""
    ops = None if fallback_ops is None or str(status) != Status.PASS else tuple(op_names(fallback_ops))
    return _cell(None if status is None else str(status), changed, title, ops)


def _short_ops(names: tuple[str, ...], shown: int = 2) -> str:
    # A matrix cell has room for a couple of names; the tooltip and the architecture page list them all.
    short = [n.removeprefix("aten::") for n in names[:shown]]
    return ", ".join(short) + (f" +{len(names) - shown}" if len(names) > shown else "")


@lru_cache(maxsize=4096)
def _cell(status: str | None, changed: bool, title: str, ops: tuple[str, ...] | None) -> Markup:
    # Memoised: a matrix page renders ~1000 cells drawn from a few dozen distinct (status, detail) pairs.
    st = style_for(status)
    tip = st.meaning + (f": {title}" if title else "")
    classes = f"st {st.css}" + (" st-changed" if changed else "")
    where, note = "", ""
    if ops is not None:  # a pass whose placement is known: said in words, never by colour alone
        where = "cpu-fallback" if ops else "native"
        tip = (f"pass · CPU fallback: {', '.join(ops)} — " if ops else "pass · native — ") + tip
        if ops:
            classes += " st-fallback"
            note = f' <span class="st-note">(cpu: {escape(_short_ops(ops))})</span>'
    mark = '<span class="changed-mark" title="changed since the previous run">●</span>' if changed else ""
    data_where = f' data-ran="{where}"' if where else ""
    return Markup(
        f'<span class="{classes}" data-status="{escape(st.status or "none")}"{data_where} title="{escape(tip)}">'
        f'<span class="st-icon" aria-hidden="true">{st.icon}</span> <span class="st-label">{st.label}</span>'
        f"{note}{mark}</span>"
    )


def legend() -> list[StatusStyle]:
    """All styles in Status order, for the legend under the matrix."""
    return [STYLES[str(s)] for s in Status]


__all__ = ["STYLES", "StatusStyle", "is_failure", "legend", "status_cell", "style_for"]
