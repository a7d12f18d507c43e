"""Store facade on SQLite and PostgreSQL: idempotent ingest, completeness, latest results and baseline reads."""

from __future__ import annotations

from service_seed import ARCHS, CHECKS, insert_bare_run, make_run, migrate, rec, seed, times
from sqlalchemy import func, select

from compat.results import Check, OpTrace, Status
from service import db
from service.models import Result
from service.store import Store


def test_migrations_reach_head_and_are_idempotent(db_url: str) -> None:
    Store(db_url)
    assert db.current_revision(db_url) == db.head_revision()
    db._upgraded.discard(db_url)  # force the real check path a second time
    assert db.upgrade(db_url) == db.head_revision()


def test_sqlite_uses_wal(sqlite_url: str) -> None:
    Store(sqlite_url)
    with db.get_engine(sqlite_url).connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_redelivered_result_replaces_not_duplicates(db_url: str) -> None:
    store = Store(db_url)
    run = make_run()
    planned = [(a.name, "neuron", str(c)) for a in ARCHS[:1] for c in CHECKS]
    store.start_run(run, ARCHS[:1], planned)
    store.start_run(run, ARCHS[:1], planned)  # idempotent on run id
    store.add_results(run.id, [rec("LlamaForCausalLM", Check.LOAD, Status.ERROR)])
    store.add_results(run.id, [rec("LlamaForCausalLM", Check.LOAD, Status.PASS, metrics={"max_abs": 0.1})])
    # A batch with the same key twice keeps the last one.
    store.add_results(run.id, [rec("LlamaForCausalLM", Check.FORWARD, Status.ERROR),
                               rec("LlamaForCausalLM", Check.FORWARD, Status.PASS)])
    results = store.run_results(run.id)
    assert [(r.check, r.status) for r in results] == [(Check.LOAD, Status.PASS), (Check.FORWARD, Status.PASS)]
    assert results[0].metrics == {"max_abs": 0.1} and results[0].error is None
    with db.session_scope(db_url) as s:
        assert s.scalar(select(func.count()).select_from(Result)) == 2


def test_run_complete_only_when_every_planned_result_is_in(db_url: str) -> None:
    store = Store(db_url)
    run = make_run()
    planned = [(a.name, "neuron", str(c)) for a in ARCHS for c in CHECKS]
    store.start_run(run, ARCHS, planned)
    # All but one planned key, plus one unplanned key that must not make up for it.
    records = [rec(a, Check(c)) for a, _, c in planned[:-1]] + [rec("LlamaForCausalLM", Check.TRAIN)]
    store.add_results(run.id, records)
    assert store.finish_run(run.id) == "incomplete"
    a, _, c = planned[-1]
    store.add_results(run.id, [rec(a, Check(c), Status.MISMATCH)])
    assert store.finish_run(run.id) == "complete"


def test_stored_pairs_are_the_pairs_with_results_of_that_run_only(db_url: str) -> None:
    store = Store(db_url)
    run, other = make_run(), make_run()
    for r in (run, other):
        store.start_run(r, ARCHS, [(a.name, "neuron", str(c)) for a in ARCHS for c in CHECKS])
    assert store.stored_pairs(run.id) == set()
    store.add_results(run.id, [rec("LlamaForCausalLM", Check.LOAD), rec("LlamaForCausalLM", Check.FORWARD),
                               rec("GPT2LMHeadModel", Check.LOAD, Status.ERROR)])
    store.add_results(other.id, [rec("Qwen2ForCausalLM", Check.LOAD)])
    assert store.stored_pairs(run.id) == {("LlamaForCausalLM", "neuron"), ("GPT2LMHeadModel", "neuron")}


def test_dispose_all_drops_pooled_connections_and_engines_reconnect(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    engine = db.get_engine(sqlite_url)
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
    assert engine.pool.checkedin() >= 1
    db.dispose_all(close=False)
    assert engine.pool.checkedin() == 0, "the pool was replaced: no inherited connection is reused"
    assert db.get_engine(sqlite_url) is engine, "engines stay registered"
    assert store.run_results("no-such-run") == []


def test_error_and_fields_round_trip(db_url: str) -> None:
    store = Store(db_url)
    run = make_run()
    store.start_run(run, ARCHS[:1], [])
    r = rec("LlamaForCausalLM", Check.FORWARD, Status.UNSUPPORTED_OP, blocking_op="aten::histc (Long)",
            fallback_ops=["aten::sort (Float)"], duration_s=1.5, peak_mem_mb=12.0, repro="compat repro x",
            log="out", reason="why", known_issue="http://x", metrics={"a": [1, 2]})
    store.add_results(run.id, [r])
    assert store.run_results(run.id) == [r]


def test_latest_results_and_baseline_run_id(db_url: str) -> None:
    store = Store(db_url)
    t = times(3)
    old = seed(store, started=t[0], failing={"LlamaForCausalLM": Status.ERROR})
    new = seed(store, started=t[1])
    cpu = seed(store, device="cpu", started=t[2])
    latest = store.latest_results("LlamaForCausalLM", "neuron")
    assert {r.status for r in latest} == {Status.PASS} and len(latest) == len(CHECKS)
    both = store.latest_results("LlamaForCausalLM")
    assert sorted({r.device for r in both}) == ["cpu", "neuron"]
    assert store.baseline_run_id(new) == old
    assert store.baseline_run_id(old) is None
    assert store.baseline_run_id(new, trigger="nightly") is None
    assert store.baseline_run_id(cpu) is None  # never another device's run


def test_op_traces_upsert(db_url: str) -> None:
    store = Store(db_url)
    run = make_run()
    store.start_run(run, ARCHS, [])
    store.add_op_traces(run.id, [OpTrace(architecture="LlamaForCausalLM", ops=["aten::mm (Float)"])])
    store.add_op_traces(run.id, [OpTrace(architecture="LlamaForCausalLM", ops=["aten::bmm (Float)"]),
                                 OpTrace(architecture="GPT2LMHeadModel", ops=[])])
    assert store.op_traces(run.id) == [OpTrace(architecture="GPT2LMHeadModel", ops=[]),
                                       OpTrace(architecture="LlamaForCausalLM", ops=["aten::bmm (Float)"])]


def test_migration_0004_backfills_has_fallback(db_url: str) -> None:
    from sqlalchemy import text

    migrate(db_url, "0003")
    insert_bare_run(db_url)
    with db.get_engine(db_url).begin() as conn:
        for i, ops in enumerate(('[]', '["aten::sort (Float)"]')):
            conn.execute(text("INSERT INTO results (run_id, architecture, device, \"check\", status, metrics, "
                              "fallback_ops, duration_s) VALUES ('r', :a, 'neuron', 'load', 'pass', '{}', :ops, 0)"),
                         {"a": f"A{i}", "ops": ops})
    db._upgraded.discard(db_url)
    db.upgrade(db_url)
    with db.session_scope(db_url) as s:
        got = dict(s.execute(select(Result.architecture, Result.has_fallback)).all())
    assert got == {"A0": False, "A1": True}


def test_concurrent_first_migrations_all_succeed(tmp_path) -> None:
    """Server and sweep processes may open a fresh DB at the same moment; every one must end at head."""
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'race.db'}"
    import time

    # Imports first, then all start migrating at the same instant (without the lock this fails most runs).
    start = time.time() + 4
    code = (f"import time; from service import db; time.sleep(max(0, {start} - time.time())); "
            f"print(db.upgrade({url!r}))")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e for _, e in outs]
    assert {o.strip() for o, _ in outs} == {db.head_revision()}
