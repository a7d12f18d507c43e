"""The headline's range across a run's measured decisions and native per check, read from the store (issue 18):
``GET /api/v1/coverage`` and the overview spell it as ``compat.decisions.headline_range(...).text()``, nothing else."""

from __future__ import annotations

import pytest
from markupsafe import escape
from service_seed import ARCHS, CHECKS, insert_bare_run, make_run, migrate, rec

from compat.decisions import DecisionEffect, effect_of, headline_range, restrict
from compat.results import Check, Status
from service.store import Store

LLAMA, QWEN, GPT2, MIXTRAL = (a.name for a in ARCHS)  # ranks 1..4
SORT_SRC = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/index.html"
GMM_SRC = "aws-neuron/torch-neuronx torch_neuronx/ops/grouped_mm.py@0123abc"


def _records() -> list:
    """Llama native; Qwen2 forward native but generate's argmax on the CPU; GPT2 blocked at an integer sort;
    Mixtral's forward runs `_grouped_mm` on the CPU (supported with fallback, generate native)."""
    out = [rec(a.name, c) for a in ARCHS for c in CHECKS if (a.name, c) not in {
        (QWEN, Check.GENERATE), (GPT2, Check.FORWARD), (GPT2, Check.GENERATE), (MIXTRAL, Check.FORWARD)}]
    return out + [
        rec(QWEN, Check.GENERATE, fallback_ops=["aten::argmax (Long)"]),
        rec(GPT2, Check.FORWARD, Status.UNSUPPORTED_OP, blocking_op="aten::sort (Long)"),
        rec(GPT2, Check.GENERATE, Status.SKIPPED, reason="forward failed"),
        rec(MIXTRAL, Check.FORWARD, fallback_ops=["aten::_grouped_mm (Float)"]),
    ]


def _effects() -> list[DecisionEffect]:
    base = {LLAMA: "supported", QWEN: "supported_with_fallback", GPT2: "failing", MIXTRAL: "supported_with_fallback"}
    sort = effect_of({"integer_sort_topk": "native"}, "integer `sort`/`topk` on the device", "low", [SORT_SRC],
                     "rerun", base, {GPT2: "supported"}, [GPT2])
    gmm = effect_of({"grouped_mm_preconditions": "skip"}, "`_grouped_mm` 128-alignment and bf16-only", "medium",
                    [GMM_SRC], "traces", base, {MIXTRAL: "supported"}, [MIXTRAL])
    strict = effect_of({"cpu_fallback": "off"}, "ops without a kernel fall back to the CPU", "low", [], "rerun", base,
                       {QWEN: "failing", MIXTRAL: "failing"}, [QWEN, MIXTRAL])
    both = effect_of({"integer_sort_topk": "native", "grouped_mm_preconditions": "skip"}, "sort + gmm", "low",
                     [SORT_SRC, GMM_SRC], "rerun", base, {GPT2: "supported", MIXTRAL: "supported"}, [GPT2, MIXTRAL])
    return [sort, gmm, strict, both]


def _run(store: Store, effects: list[DecisionEffect] | None) -> str:
    run = make_run()
    store.start_run(run, ARCHS, [(a.name, "neuron", str(c)) for a in ARCHS for c in CHECKS])
    store.add_results(run.id, _records())
    store.finish_run(run.id)
    if effects is not None:
        store.set_decisions(run.id, effects)
    return run.id


def test_migration_0008_adds_decisions_to_existing_runs(db_url: str) -> None:
    """A run stored before 0008 reads back with no decisions (the plain head); down and up again both apply."""
    from sqlalchemy import inspect

    from service import db

    migrate(db_url, "0007")
    insert_bare_run(db_url)
    migrate(db_url, "0008")
    assert db.current_revision(db_url) == "0008"
    store = Store(db_url)
    assert store.decisions("r") == []
    store.set_decisions("r", _effects()[:1])
    assert store.decisions("r") == _effects()[:1]
    migrate(db_url, "0007", "downgrade")
    with db.get_engine(db_url).connect() as conn:
        assert "decisions" not in {c["name"] for c in inspect(conn).get_columns("runs")}
    migrate(db_url, "head")
    assert db.current_revision(db_url) == db.head_revision()


@pytest.fixture
def store(client, sqlite_url: str) -> Store:  # the client first: the app's store and this one are the same DB
    return Store(sqlite_url)


def test_set_decisions_replaces_and_reads_back(db_url: str) -> None:
    store = Store(db_url)
    rid = _run(store, _effects())
    assert store.decisions(rid) == _effects()
    store.set_decisions(rid, _effects()[:1])  # a re-measure replaces, never merges
    assert store.decisions(rid) == _effects()[:1]
    store.set_decisions(rid, [])
    assert store.decisions(rid) == []
    with pytest.raises(KeyError):
        store.set_decisions("nope", [])


def test_coverage_carries_the_range_and_its_one_spelling(client, store: Store) -> None:
    rid = _run(store, _effects())
    cov = client.get("/api/v1/coverage", params={"device": "neuron"}).json()["items"][0]
    want = headline_range(3, 4, _effects())
    assert (cov["run_id"], cov["supported"], cov["native"]) == (rid, 3, 1)
    assert (cov["range_low"], cov["range_high"]) == (want.low, want.high) == (1, 4)
    assert cov["range_text"] == want.text()
    assert cov["range_text"].startswith("3 (75.0%) out of the box; 1–4 across 3 decision(s): ")
    assert "grouped_mm_preconditions + integer_sort_topk together move +1" in cov["range_text"]
    by_key = {d["key"]: d for d in cov["decisions"]}
    sort = by_key["integer_sort_topk=native"]
    assert (sort["moves"], sort["native_moves"], sort["gains"], sort["confidence"], sort["measured_by"],
            sort["sources"], sort["affected"]) == (1, 1, [GPT2], "low", "rerun", [SORT_SRC], 1)
    gmm = by_key["grouped_mm_preconditions=skip"]
    assert (gmm["moves"], gmm["native_moves"], gmm["native_gains"]) == (0, 1, [MIXTRAL])
    assert by_key["cpu_fallback=off"]["losses"] == [QWEN, MIXTRAL]


def test_top_n_restricts_the_effects_to_its_own_architectures(client, store: Store) -> None:
    _run(store, _effects())
    top = client.get("/api/v1/coverage", params={"top_n": 2}).json()["items"][0]
    want = headline_range(2, 2, [restrict(e, [LLAMA, QWEN]) for e in _effects()])
    assert (top["supported"], top["total"]) == (2, 2)
    assert top["range_text"] == want.text()
    assert (top["range_low"], top["range_high"]) == (1, 2)  # GPT2's gain and Mixtral's loss are outside the top 2
    moves = {d["key"]: (d["moves"], d["gains"], d["losses"]) for d in top["decisions"]}
    assert moves["integer_sort_topk=native"] == (0, [], [])
    assert moves["cpu_fallback=off"] == (-1, [], [QWEN])


def test_native_per_check_counts_a_forward_without_fallback(client, store: Store) -> None:
    _run(store, None)
    cov = client.get("/api/v1/coverage", params={"device": "neuron"}).json()["items"][0]
    native = {pc["check"]: (pc["passed"], pc["native"]) for pc in cov["per_check"]}
    # Qwen2's forward ran wholly on the device (native) though its generate's argmax fell back (not native);
    # Mixtral's forward ran `_grouped_mm` on the CPU, its generate none.
    assert native == {"load": (4, 4), "forward": (3, 2), "generate": (3, 2), "train": (0, 0)}  # train: no record
    assert cov["native"] == 1  # all support checks native: Llama alone


def test_run_without_decisions_shows_the_plain_head(client, store: Store) -> None:
    _run(store, None)
    cov = client.get("/api/v1/coverage").json()["items"][0]
    assert cov["range_low"] == cov["range_high"] == cov["supported"] == 3
    assert cov["range_text"] == headline_range(3, 4, []).text() == "3 (75.0%) out of the box"
    assert cov["decisions"] == []
    page = client.get("/").text
    assert 'data-metric="range"' not in page  # no decisions measured: no range line under the figure
    assert "data-decisions=" not in page


def test_overview_shows_the_range_native_per_check_and_the_decisions(client, store: Store) -> None:
    rid = _run(store, None)
    assert "across 3 decision(s)" not in client.get("/").text  # cached page of the run before its decisions
    store.set_decisions(rid, _effects())  # bumps the run's data version: the page cache must not serve the old one
    page = client.get("/").text
    text = headline_range(3, 4, _effects()).text()
    # The range is its own line, "low–high depending on N modelling decisions" (issue 30 item 6); the whole sentence
    # rides in its tooltip, once.
    rng = headline_range(3, 4, _effects())
    assert f'title="{escape(text)}"><strong data-range="{rng.low}-{rng.high}">{rng.low}–{rng.high}</strong>' in page
    assert page.count(str(escape(text))) == 1
    assert ('native per check: load <span data-metric="native-load">4 / 4</span>, forward '
            '<span data-metric="native-forward">2 / 4</span>, generate <span data-metric="native-generate">2 / 4</span>'
            in page)
    assert 'data-metric="out-of-box">3 / 4 (75.0%)</span>' in page  # the report line is kept as it was
    assert 'data-decision="integer_sort_topk=native"' in page
    # The link keeps the whole URL as its target; its label drops the scheme so the column stays readable (issue 30).
    assert f'<a href="{SORT_SRC}" rel="noreferrer">{SORT_SRC.removeprefix("https://")}</a>' in page
    assert GMM_SRC in page and f'href="{GMM_SRC}"' not in page  # a repo ref is text, not a link
    assert '<td class="num" data-metric="moves">-2</td>' in page and '<td class="num" data-metric="moves">+1</td>' in page
