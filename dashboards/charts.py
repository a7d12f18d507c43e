"""Server-side SVG charts (no JavaScript, no CDN): the coverage-over-time line chart of the overview page.

Pure functions from numbers to markup, so they are testable without a browser and render offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

# Distinguishable in greyscale too: every series also gets its own dash pattern and marker shape.
PALETTE = ("#2563eb", "#d97706", "#059669", "#7c3aed", "#dc2626", "#0891b2")
DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "4 4")


@dataclass(frozen=True)
class Series:
    """One line: a name and a value (0..100, or None where this series has no point) per x position."""

    name: str
    values: Sequence[float | None]


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def line_chart(
    series: Sequence[Series],
    x_labels: Sequence[str],
    *,
    title: str,
    width: int = 1100,
    height: int = 240,
    y_max: float = 100.0,
    y_suffix: str = "%",
) -> Markup:
    """An accessible SVG line chart (role=img with a title and a text description of the last values)."""
    pad_l, pad_r, pad_t, pad_b = 48, 48, 12, 34
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    n = len(x_labels)

    def x(i: int) -> float:
        return pad_l + (plot_w / 2 if n <= 1 else plot_w * i / (n - 1))

    def y(v: float) -> float:
        return pad_t + plot_h * (1 - min(max(v, 0.0), y_max) / y_max)

    last = [f"{s.name} {_fmt(v)}{y_suffix}" for s in series if (v := _last_value(s.values)) is not None]
    desc = f"{title}: {n} runs" + (f"; latest {', '.join(last)}" if last else "")
    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(desc)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(desc)}</title>",
    ]
    for tick in (0, 25, 50, 75, 100):
        ty = y(y_max * tick / 100)
        out.append(f'<line class="grid" x1="{pad_l}" x2="{width - pad_r}" y1="{ty:.1f}" y2="{ty:.1f}"/>')
        out.append(
            f'<text class="axis" x="{pad_l - 6}" y="{ty + 4:.1f}" text-anchor="end">'
            f"{_fmt(y_max * tick / 100)}{y_suffix}</text>"
        )
    # Thin the x labels so they never overlap: at most ~8 shown.
    step = max(1, -(-n // 8))
    for i, label in enumerate(x_labels):
        if i % step == 0 or i == n - 1:
            out.append(
                f'<text class="axis" x="{x(i):.1f}" y="{height - pad_b + 18}" text-anchor="middle">'
                f"{escape(label)}</text>"
            )
    for k, s in enumerate(series):
        color, dash = PALETTE[k % len(PALETTE)], DASHES[k % len(DASHES)]
        # Runs of other devices leave None here; connect this device's own runs across them.
        seg = [(i, v) for i, v in enumerate(s.values) if v is not None]
        if len(seg) > 1:
            pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in seg)
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(
                f'<polyline class="line" points="{pts}" fill="none" stroke="{color}" stroke-width="2"{dash_attr}/>'
            )
        for i, v in enumerate(s.values):
            if v is None:
                continue
            out.append(
                f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(s.name)} · {escape(x_labels[i])}: {_fmt(v)}{y_suffix}</title></circle>"
            )
    out.append("</svg>")
    return Markup("".join(out))


def legend_items(series: Sequence[Series]) -> list[tuple[str, str, str]]:
    """(name, colour, dash) per series, so the template can draw a matching HTML legend."""
    return [(s.name, PALETTE[k % len(PALETTE)], DASHES[k % len(DASHES)]) for k, s in enumerate(series)]


def _last_value(values: Sequence[float | None]) -> float | None:
    return next((v for v in reversed(values) if v is not None), None)
