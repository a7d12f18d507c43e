"""The matrix cell says where a pass ran: "pass · native", or "pass · CPU fallback" naming the ops (issue 19).

Server-rendered HTML over a store with one native pass and one pass with CPU-fallback ops; no browser needed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from live_server import make_app

from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Check, DeviceInfo, ResultRecord, RunInfo, Status
from dashboards.status_style import status_cell

NATIVE, FALLBACK = "LlamaForCausalLM", "MixtralForCausalLM"
# The fallback architecture's ops on the CPU per check; its load and train checks ran natively.
OPS = {Check.FORWARD: ["aten::isin (Long)"], Check.GENERATE: ["aten::argmax (Long)", "aten::isin (Long)"]}


@pytest.fixture
def matrix_html(tmp_path) -> tuple[str, dict]:  # noqa: ANN001
    """(the /matrix page, the API's architecture list) over a one-run store."""
    from fastapi.testclient import TestClient

    from service.store import Store

    url = f"sqlite:///{tmp_path / 'fallback.db'}"
    store = Store(url)
    catalog = [ArchitectureEntry(name=NATIVE, model_type="llama", rank=1),
               ArchitectureEntry(name=FALLBACK, model_type="mixtral", rank=2)]
    run = RunInfo(device=DeviceInfo(name="neuron", simulated=True), started=datetime.now(UTC))
    store.start_run(run, catalog, [(a.name, "neuron", str(c)) for a in catalog for c in DEFAULT_CHECKS])
    store.add_results(run.id, [
        ResultRecord(architecture=a.name, rank=a.rank, device="neuron", check=c, status=Status.PASS,
                     fallback_ops=OPS.get(c, []) if a.name == FALLBACK else [])
        for a in catalog for c in DEFAULT_CHECKS])
    store.finish_run(run.id)
    with TestClient(make_app(url)) as client:
        page = client.get("/matrix")
        assert page.status_code == 200
        return page.text, client.get("/api/v1/architectures").json()


def _cell(html: str, arch: str, col: str) -> str:
    row = re.search(rf'<tr data-arch="{arch}">(.*?)</tr>', html, re.S)
    assert row, f"no matrix row for {arch}"
    cell = re.search(rf'data-col="{col}">(.*?)</td>', row.group(1), re.S)
    assert cell, f"no {col} cell for {arch}"
    return cell.group(1)


def test_a_fallback_pass_names_its_ops_and_a_native_pass_says_native(matrix_html) -> None:  # noqa: ANN001
    html, _ = matrix_html
    native = _cell(html, NATIVE, "neuron:generate")
    assert 'data-ran="native"' in native and "pass · native" in native
    assert "cpu:" not in native and "CPU fallback" not in native

    generate = _cell(html, FALLBACK, "neuron:generate")
    assert 'data-ran="cpu-fallback"' in generate and "st-fallback" in generate
    assert "pass · CPU fallback: aten::argmax, aten::isin" in generate  # every op, in the tooltip
    assert "(cpu: argmax, isin)" in generate  # and visibly in the cell
    forward = _cell(html, FALLBACK, "neuron:forward")
    assert "pass · CPU fallback: aten::isin" in forward and "(cpu: isin)" in forward
    # The same architecture's checks without CPU ops ran natively.
    assert 'data-ran="native"' in _cell(html, FALLBACK, "neuron:load")


def test_the_api_item_carries_the_ops_per_check(matrix_html) -> None:  # noqa: ANN001
    _, api = matrix_html
    items = {i["name"]: i for i in api["items"]}
    assert items[NATIVE]["fallback_ops"] == {}
    assert items[FALLBACK]["fallback_ops"] == {"forward": ["aten::isin (Long)"],
                                               "generate": ["aten::argmax (Long)", "aten::isin (Long)"]}


def test_status_cell_placement_only_for_a_pass() -> None:
    assert "data-ran" not in str(status_cell("pass"))  # not said: unchanged for pages that do not know
    assert "data-ran" not in str(status_cell("error", fallback_ops=["aten::argmax"]))
    many = str(status_cell("pass", fallback_ops=["aten::a (Long)", "aten::a (Float)", "aten::b", "aten::c"]))
    assert "(cpu: a, b +1)" in many and "CPU fallback: aten::a, aten::b, aten::c" in many
    assert "&lt;x&gt;" in str(status_cell("pass", fallback_ops=["<x>"]))  # op names are escaped
