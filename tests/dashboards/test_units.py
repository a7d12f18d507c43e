"""Pure helpers of the dashboard without a browser: status styles, SVG chart geometry, matrix view logic,
and change detection across runs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from compat.results import Status
from dashboards import matrix as mx
from dashboards.changes import history_changes, latest_changes
from dashboards.charts import Series, line_chart
from dashboards.status_style import STYLES, status_cell, style_for
from dashboards.templating import error_text
from service.schemas import ArchitectureRow, HistoryPoint


def test_every_status_has_a_distinct_glyph_and_word() -> None:
    assert set(STYLES) == {str(s) for s in Status}
    assert len({s.icon for s in STYLES.values()}) == len(STYLES)
    assert len({s.label for s in STYLES.values()}) == len(STYLES)
    assert style_for("no-such-status").label == "n/a" and style_for(None).label == "n/a"


def test_status_cell_escapes_detail_and_marks_changes() -> None:
    html = str(status_cell("unsupported_op", changed=True, title='<script>"x"</script>'))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'data-status="unsupported_op"' in html and "st-changed" in html and "changed since" in html


def _points(svg: str) -> list[list[tuple[float, float]]]:
    return [[tuple(map(float, p.split(","))) for p in m.split()] for m in re.findall(r'points="([^"]+)"', svg)]


def test_line_chart_geometry_and_text_alternative() -> None:
    svg = str(line_chart([Series("neuron", [0.0, None, 100.0]), Series("c<pu", [50.0, 50.0, None])],
                         ["r1", "r2", "r3"], title="t", width=200, height=100))
    (neuron, cpu) = _points(svg)
    # pad_t=12, pad_b=34 -> plot spans y 12..66: 0% at the bottom, 100% at the top.
    assert neuron[0][1] == 66.0 and neuron[1][1] == 12.0
    assert len(neuron) == 2, "a run of another device (None) is skipped, not drawn as zero"
    assert cpu[0][1] == cpu[1][1] == 39.0
    assert "latest neuron 100%, c&lt;pu 50%" in svg
    assert "<script" not in svg


def _row(name: str, rank: int, device: str, statuses: dict[str, str], op: str | None = None) -> ArchitectureRow:
    supported = all(statuses.get(c) == "pass" for c in ("load", "forward", "generate"))
    return ArchitectureRow(name=name, rank=rank, model_type=name[:4].lower(), device=device, run_id="r",
                           supported=supported, statuses=statuses, blocking_op=op)


PASS4 = {c: "pass" for c in ("load", "forward", "generate", "train")}
ROWS = [
    _row("LlamaForCausalLM", 1, "neuron", PASS4), _row("LlamaForCausalLM", 1, "cpu", PASS4),
    _row("MixtralForCausalLM", 2, "neuron", {**PASS4, "forward": "unsupported_op"}, "aten::histc (Long)"),
    _row("MixtralForCausalLM", 2, "cpu", PASS4),
    _row("BloomForCausalLM", 3, "neuron", {**PASS4, "train": "crash"}), _row("BloomForCausalLM", 3, "cpu", PASS4),
]


def _view(**params: str) -> list[str]:
    rows, devices = mx.pivot(ROWS, devices_order=["neuron"])
    query = mx.MatrixQuery.from_params(params)
    return [r.name for r in mx.apply(rows, mx.columns(rows, devices, query), query)]


def test_matrix_pivot_filter_search_sort() -> None:
    rows, devices = mx.pivot(ROWS, devices_order=["neuron"])
    assert devices == ["neuron", "cpu"] and [r.name for r in rows] == ["LlamaForCausalLM", "MixtralForCausalLM",
                                                                      "BloomForCausalLM"]
    assert rows[1].cells[("neuron", "forward")] == "unsupported_op" and rows[1].blocking_op == "aten::histc (Long)"
    assert _view(status="failing") == ["MixtralForCausalLM", "BloomForCausalLM"]
    assert _view(status="failing", check="forward") == ["MixtralForCausalLM"]
    assert _view(status="failing", device="cpu") == []
    assert _view(status="not_supported") == ["MixtralForCausalLM"]  # Bloom's train crash does not block support
    assert _view(status="supported", device="neuron") == ["LlamaForCausalLM", "BloomForCausalLM"]
    assert _view(q="HISTC") == ["MixtralForCausalLM"], "search covers the blocking op, case-insensitively"
    assert _view(q="bloom causal") == ["BloomForCausalLM"], "every word must match"
    assert _view(sort="name", order="desc") == ["MixtralForCausalLM", "LlamaForCausalLM", "BloomForCausalLM"]
    assert _view(sort="neuron:train") == ["BloomForCausalLM", "LlamaForCausalLM", "MixtralForCausalLM"]
    assert _view(sort="failures") == ["MixtralForCausalLM", "BloomForCausalLM", "LlamaForCausalLM"]
    assert _view(sort="no-such-column") == _view()


def test_matrix_query_is_lenient_and_round_trips_through_the_url() -> None:
    q = mx.MatrixQuery.from_params({"page": "x", "order": "sideways", "q": "  llama  "})
    assert (q.page, q.order, q.q) == (1, "asc", "llama")
    assert mx.MatrixQuery().url() == "/matrix"
    url = q.url(status="failing", page=3)
    assert url == "/matrix?q=llama&status=failing&page=3"
    assert q.sort_url("rank") == "/matrix?q=llama&order=desc"  # the active column flips
    assert q.sort_url("name") == "/matrix?q=llama&sort=name"


def test_paginate_clamps_the_page() -> None:
    rows, _ = mx.pivot(ROWS)
    assert mx.paginate(rows, 9, per_page=2)[1:] == (2, 2)
    assert [r.name for r in mx.paginate(rows, 2, per_page=2)[0]] == ["BloomForCausalLM"]
    assert mx.paginate([], 1) == ([], 1, 1)


def test_history_changes_compare_same_device_and_trigger() -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)

    def hp(run: str, hours: int, device: str, trigger: str, fwd: str) -> HistoryPoint:
        return HistoryPoint(run_id=run, started=t + timedelta(hours=hours), trigger=trigger, device=device,
                            supported=fwd == "pass", statuses={"load": "pass", "forward": fwd})

    history = [hp("n3", 3, "neuron", "nightly", "mismatch"), hp("m1", 2, "neuron", "manual", "pass"),
               hp("c1", 1, "cpu", "nightly", "pass"), hp("n1", 0, "neuron", "nightly", "pass")]
    changes = {p.run_id: c for p, c in history_changes(history)}
    assert changes == {"n3": {"forward"}, "m1": set(), "c1": set(), "n1": set()}
    assert latest_changes(history, ["n3", "c1"]) == {("neuron", "forward")}


def test_an_error_in_a_table_cell_is_never_cut_mid_sentence() -> None:
    """Issue 19: the pages cut errors at 140-160 characters, mid-word; now whole or at a sentence end, marked."""
    short = "The neuron kernel of 'aten::sort' failed for Int."
    assert error_text(short) == short
    long = ("The neuron kernel of 'aten::sort' failed: NCC_EVRF013 integer sort is not supported on trn2. " * 2
            + "x" * 300)
    text = error_text(long)
    assert text.endswith("on trn2. […]") and len(text) < len(long)
    assert text[:-4].rstrip().endswith(".")
