"""Query functions over seeded runs: coverage (overall, per check, top-N), lists, detail, diff, blockers."""

from __future__ import annotations

import pytest
from service_seed import ARCHS, make_run, rec, seed, times

from compat.results import Check, Status, Trigger
from service import db, queries
from service.store import Store


@pytest.fixture
def seeded(db_url: str):
    store = Store(db_url)
    t = times(4)
    a = seed(store, started=t[0], failing={"GPT2LMHeadModel": Status.UNSUPPORTED_OP})
    b = seed(store, started=t[1], failing={"LlamaForCausalLM": Status.MISMATCH,
                                           "MixtralForCausalLM": Status.UNSUPPORTED_OP})
    cpu = seed(store, device="cpu", started=t[2])
    # A later submission run must not change the headline.
    sub = make_run(trigger=Trigger.SUBMISSION, started=t[3])
    store.start_run(sub, ARCHS[:1], [])
    store.add_results(sub.id, [rec("LlamaForCausalLM", Check.LOAD, Status.ERROR)])
    store.finish_run(sub.id)
    with db.session_scope(db_url) as s:
        yield s, {"a": a, "b": b, "cpu": cpu}


def test_coverage_latest_per_device_and_top_n(seeded) -> None:
    s, ids = seeded
    cov = {c.device: c for c in queries.coverage(s).items}
    assert cov["neuron"].run_id == ids["b"] and cov["cpu"].run_id == ids["cpu"]
    assert (cov["neuron"].supported, cov["neuron"].total) == (2, 4)
    assert cov["neuron"].fraction == 0.5
    per = {c.check: c.passed for c in cov["neuron"].per_check}
    assert per["load"] == 4 and per["forward"] == 2
    top2 = queries.coverage(s, device="neuron", top_n=2).items[0]
    assert (top2.supported, top2.total) == (1, 2)  # Llama (rank 1) fails, Qwen2 passes
    old = queries.coverage(s, run_id=ids["a"]).items[0]
    assert (old.supported, old.total) == (3, 4)
    with pytest.raises(queries.NotFound):
        queries.coverage(s, run_id="nope")


def test_coverage_history_uses_rollups(seeded) -> None:
    s, ids = seeded
    hist = queries.coverage_history(s, "neuron")
    assert [(p.run_id, p.supported, p.total) for p in hist.points] == [(ids["a"], 3, 4), (ids["b"], 2, 4)]


def test_list_architectures_filters_and_pages(seeded) -> None:
    s, _ = seeded
    page = queries.list_architectures(s, device="neuron")
    assert [r.name for r in page.items] == [a.name for a in ARCHS] and page.total == 4
    unsup = queries.list_architectures(s, device="neuron", status="unsupported")
    assert [r.name for r in unsup.items] == ["LlamaForCausalLM", "MixtralForCausalLM"]
    op = queries.list_architectures(s, device="neuron", status="unsupported_op", check="forward")
    assert [r.name for r in op.items] == ["MixtralForCausalLM"]
    assert op.items[0].blocking_op == "aten::histc (Long)"
    assert queries.list_architectures(s, device="neuron", status="pass", check="train").total == 0
    assert [r.name for r in queries.list_architectures(s, q="qwen").items] == ["Qwen2ForCausalLM"] * 2
    p2 = queries.list_architectures(s, device="neuron", page=2, per_page=3)
    assert [r.name for r in p2.items] == ["MixtralForCausalLM"] and p2.total == 4


def test_architecture_detail_and_history(seeded) -> None:
    s, ids = seeded
    d = queries.architecture_detail(s, "LlamaForCausalLM")
    assert d.supported == {"cpu": True, "neuron": False}
    # The catalog's history and the submitted configs are kept apart (issue 19): a submission never tops it.
    assert [h.run_id for h in d.history if h.device == "neuron"] == [ids["b"], ids["a"]]
    assert {h.kind for h in d.history} == {"sweep"}
    assert [(h.kind, h.trigger, h.statuses) for h in d.submitted] == [("submission", "submission", {"load": "error"})]
    assert d.error is None and d.blocking_op is None  # a mismatch has neither
    assert d.repro == "compat repro LlamaForCausalLM"
    m = queries.architecture_detail(s, "MixtralForCausalLM")
    assert m.error == "RuntimeError: MixtralForCausalLM forward failed"
    assert m.blocking_op == "aten::histc (Long)"
    with pytest.raises(queries.NotFound):
        queries.architecture_detail(s, "NoSuchForCausalLM")


def test_diff_runs(seeded) -> None:
    s, ids = seeded
    d = queries.diff_runs(s, ids["a"], ids["b"])
    assert [e.architecture for e in d.regressions] == ["LlamaForCausalLM", "MixtralForCausalLM"]
    assert [e.architecture for e in d.fixes] == ["GPT2LMHeadModel"]
    assert d.regressions[0].changed_checks == ["forward"] and not d.new and not d.removed
    back = queries.diff_runs(s, ids["b"], ids["a"])
    assert [e.architecture for e in back.fixes] == ["LlamaForCausalLM", "MixtralForCausalLM"]


def test_blockers_and_runs(seeded) -> None:
    s, ids = seeded
    b = queries.blockers(s, device="neuron")
    assert [(x.op, x.count, x.architectures, x.unlocks, x.variants) for x in b.items] == [
        ("aten::histc", 1, ["MixtralForCausalLM"], None, ["aten::histc (Long)"])]  # no chain measured: unknown
    runs = queries.list_runs(s, device="neuron", trigger="manual")
    assert [r.id for r in runs.items] == [ids["b"], ids["a"]] and runs.items[0].supported == 2
    run = queries.get_run(s, ids["b"])
    assert run.state == "complete" and run.status_counts == {"pass": 10, "mismatch": 1, "unsupported_op": 1}


def test_declared_coverage_labels_and_counts(seeded) -> None:
    s, _ = seeded
    dc = queries.declared_coverage(s, top_n=3)
    declared = [r for r in dc.rows if r.kind == "declared"][0]
    assert declared.label == "declared, not measured" and declared.name == "optimum-neuron 0.4.5"
    # Top 3 = Llama, Qwen2, GPT2; Optimum Neuron declares the first two.
    assert declared.architectures == ["LlamaForCausalLM", "Qwen2ForCausalLM"] and declared.total == 3
    measured = {r.name: r.supported for r in dc.rows if r.kind == "measured"}
    assert measured == {"cpu": 3, "neuron": 2}


def test_rollup_cache_follows_late_writes(db_url: str) -> None:
    """A result re-delivered after the run finished must show at once (the cache keys on data_version)."""
    store = Store(db_url)
    run_id = seed(store)
    with db.session_scope(db_url) as s:
        assert queries.coverage(s, run_id=run_id).items[0].supported == 4
    store.add_results(run_id, [rec("Qwen2ForCausalLM", Check.GENERATE, Status.TIMEOUT)])
    with db.session_scope(db_url) as s:
        assert queries.coverage(s, run_id=run_id).items[0].supported == 3
        assert [e.name for e in queries.list_architectures(s, status="timeout").items] == ["Qwen2ForCausalLM"]


def test_fallback_counts_as_supported_with_fallback(db_url: str) -> None:
    store = Store(db_url)
    run = make_run()
    store.start_run(run, ARCHS[:2], [])
    store.add_results(run.id, [rec(a.name, c, fallback_ops=["aten::sort (Float)"] if a.rank == 1 else [])
                               for a in ARCHS[:2] for c in (Check.LOAD, Check.FORWARD, Check.GENERATE)])
    store.finish_run(run.id)
    with db.session_scope(db_url) as s:
        cov = queries.coverage(s, run_id=run.id).items[0]
        assert (cov.supported, cov.supported_with_fallback) == (2, 1)
        rows = queries.list_architectures(s).items
        assert [(r.name, r.fallback) for r in rows] == [("LlamaForCausalLM", True), ("Qwen2ForCausalLM", False)]
