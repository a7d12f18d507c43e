"""Blocker chains kept on the run (Store.set_chains, migration 0015) and read back the same way by
`GET /api/v1/blockers`, the Op blockers page and `compat blockers` (issue 30 item 1)."""

from __future__ import annotations

import re

import pytest
from service_seed import ARCHS, make_run
from typer.testing import CliRunner

from cli.app import app
from cli.console import console
from compat.chains import Chain, ChainEnd, Link
from compat.results import Check, ResultRecord, Scope, Status
from compat.settings import get_settings
from service.store import Store

SORT, GMM = "aten::sort (Int)", "aten::_grouped_mm (Float, Int)"
MIXTRAL, LLAMA, QWEN = "MixtralForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM"


def _records() -> list[ResultRecord]:
    out = []
    for a in ARCHS:
        for c in (Check.LOAD, Check.FORWARD, Check.GENERATE):
            failing = a.name in (MIXTRAL, QWEN) and c != Check.LOAD
            out.append(ResultRecord(architecture=a.name, rank=a.rank, device="neuron", check=c,
                                    status=Status.UNSUPPORTED_OP if failing else Status.PASS,
                                    blocking_op=SORT if failing else None))
    return out


def _chains() -> list[Chain]:
    link = Link(op=SORT, check="forward", status="unsupported_op")
    return [Chain(architecture=MIXTRAL, device="neuron", end=ChainEnd.PASS,
                  links=[link, Link(op=GMM, check="forward", status="unsupported_op")]),
            Chain(architecture=QWEN, device="neuron", end=ChainEnd.PASS, links=[link])]


def test_stored_chains_give_the_same_unlocks_on_the_api_the_page_and_the_cli(
        sqlite_url: str, client, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    store = Store(sqlite_url)
    run = make_run("neuron")
    recs = _records()
    store.start_run(run, ARCHS, [r.key for r in recs])
    store.add_results(run.id, recs)
    store.finish_run(run.id)
    before = client.get("/api/v1/blockers", params={"run_id": run.id}).json()
    assert before["measured"] is False and before["items"][0]["unlocks"] is None
    store.set_chains(run.id, _chains())

    got = client.get("/api/v1/blockers", params={"run_id": run.id}).json()
    page = client.get("/blockers").text
    monkeypatch.setenv("COMPAT_DATABASE_URL", sqlite_url)
    monkeypatch.setenv("COMPAT_DEVICE", "neuron")
    monkeypatch.setattr(console, "width", 200)
    get_settings.cache_clear()
    try:
        res = CliRunner().invoke(app, ["blockers"])
    finally:
        get_settings.cache_clear()
    assert res.exit_code == 0, res.output
    cli = " ".join(res.output.split())

    assert got["measured"] is True and "chains measured" in got["note"]
    sort, gmm = got["items"]
    assert (sort["op"], sort["count"], sort["unlocks"], sort["first"]) == ("aten::sort", 2, [QWEN], [QWEN, MIXTRAL])
    assert (gmm["op"], gmm["count"], gmm["unlocks"], gmm["first"]) == ("aten::_grouped_mm", 1, [], [])
    assert [(u["ops"], u["architectures"]) for u in got["unlock_sets"]] == [
        (["aten::sort"], [QWEN]), (["aten::sort", "aten::_grouped_mm"], [MIXTRAL])]
    mixtral = next(c for c in got["chains"] if c["architecture"] == MIXTRAL)
    assert mixtral["ops"] == ["aten::sort", "aten::_grouped_mm"] and mixtral["end"] == "pass"
    assert mixtral["text"] == f"{SORT} → {GMM} → pass"

    for u in got["unlock_sets"]:
        assert u["message"] in cli
    assert "implement aten::sort to unlock 1 architecture(s)" in cli
    assert "implement aten::sort + aten::_grouped_mm to unlock 1 architecture(s)" in cli
    assert f"{MIXTRAL} │ {SORT} → {GMM} → pass" in cli
    rows = re.findall(r'data-op="(aten::\w+)".*?data-count>(\d+)</td>\s*<td class="num" data-unlocks>(\d+|\?)<', page,
                      re.S)
    assert rows == [("aten::sort", "2", "1"), ("aten::_grouped_mm", "1", "0")]
    assert re.findall(r'data-unlock-set="([^"]+)" data-unlocks="(\d+)"', page) == [
        ("aten::sort", "1"), ("aten::sort + aten::_grouped_mm", "1")]
    assert LLAMA not in [c["architecture"] for c in got["chains"]]


def test_blockers_after_a_selection_sweep_names_the_run_option(sqlite_url: str, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    # `compat sweep --arch A --arch B` is a selection, never the headline: `compat blockers` says how to read it.
    store = Store(sqlite_url)
    run = make_run("neuron").model_copy(update={"scope": Scope.SELECTION})
    recs = _records()
    store.start_run(run, ARCHS, [r.key for r in recs])
    store.add_results(run.id, recs)
    store.finish_run(run.id)
    monkeypatch.setenv("COMPAT_DATABASE_URL", sqlite_url)
    monkeypatch.setattr(console, "width", 200)
    get_settings.cache_clear()
    try:
        headline = CliRunner().invoke(app, ["blockers", "--device", "neuron"])
        one = CliRunner().invoke(app, ["blockers", "--run", run.id])
    finally:
        get_settings.cache_clear()
    assert headline.exit_code == 1 and "compat blockers --run ID" in " ".join(headline.output.split())
    assert one.exit_code == 0 and "only the first blocker is known" in " ".join(one.output.split()), one.output
