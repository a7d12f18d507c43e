"""Migration 0012 and the store's identity reads (issue 32 item 4): stored runs are named by the profile and strict
mode they recorded, and every latest/baseline read matches on that identity."""

from __future__ import annotations

import json

from service_seed import migrate
from sqlalchemy import text

from compat.results import DeviceInfo, ResultRecord, RunInfo, Status
from service import db, queries
from service.store import Store


def _insert(db_url: str, run_id: str, details: dict, started: str) -> None:
    info = json.dumps({"name": "neuron", "simulated": True, "details": details})
    with db.get_engine(db_url).begin() as conn:
        conn.execute(text("INSERT INTO runs (id, trigger, device, catalog_source, versions, checks, device_info, "
                          "started, state, planned_count, scope) VALUES (:id, 'manual', 'neuron', 'registry', '{}', "
                          "'[]', :info, :started, 'complete', 0, 'full')"),
                     {"id": run_id, "info": info, "started": started})


def test_migration_0012_names_stored_runs_by_their_recorded_profile_and_strict(db_url: str) -> None:
    migrate(db_url, "0009")
    with db.get_engine(db_url).begin() as conn:
        conn.execute(text("INSERT INTO devices (name, simulated, description, torch_version, backend_version, "
                          "details) VALUES ('neuron', true, '', '', '', '{}')"))
    _insert(db_url, "legacy", {"profile": "legacy-xla", "strict": False}, "2026-01-01")
    _insert(db_url, "trn2", {"profile": "trn2", "strict": False}, "2026-01-02")
    _insert(db_url, "strict", {"profile": "trn2", "strict": True}, "2026-01-03")
    _insert(db_url, "bare", {}, "2026-01-04")
    db._upgraded.discard(db_url)
    db.upgrade(db_url)
    with db.session_scope(db_url) as s:
        got = dict(s.execute(text("SELECT id, identity FROM runs")).all())
        assert got == {"legacy": "neuron (legacy-xla)", "trn2": "neuron (trn2)", "strict": "neuron (trn2, strict)",
                       "bare": "neuron"}
        assert queries.list_devices(s)[0].name == "neuron"
        assert [d.name for d in queries.list_devices(s)] == ["neuron", "neuron (legacy-xla)", "neuron (trn2)",
                                                             "neuron (trn2, strict)"]
    store = Store(db_url)
    # The trn2 run was stored after the legacy-xla one: before 0012 that was its baseline.
    assert store.baseline_run_id("trn2") is None and store.baseline_run_id("strict") is None
    migrate(db_url, "0009", "downgrade")  # and back: the columns go, the runs stay
    with db.get_engine(db_url).begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == 4


def test_a_run_records_its_identity_and_determinants_and_reads_match_on_them(db_url: str) -> None:
    store = Store(db_url)
    ids = {}
    for profile, strict in (("trn2", False), ("trn3", False), ("trn2", True)):
        run = RunInfo(device=DeviceInfo(name="neuron", simulated=True, details={"profile": profile, "strict": strict}),
                      determinants={"torch": "2.13.0", "profile": profile, "mode": "strict" if strict else "fallback"})
        store.start_run(run, [], [])
        store.add_results(run.id, [ResultRecord(architecture="A", device="neuron", check="load", status=Status.PASS)])
        store.finish_run(run.id)
        ids[(profile, strict)] = run.id
    assert store.determinants(ids[("trn3", False)])["profile"] == "trn3"
    with store.session() as s:
        latest = queries.latest_runs_of(s, "A")
        assert latest == {"neuron (trn2)": ids[("trn2", False)], "neuron (trn3)": ids[("trn3", False)],
                          "neuron (trn2, strict)": ids[("trn2", True)]}
        recs = queries.latest_results_in(s, "A", "neuron")  # a plain name: the default profile, fallback on
        assert [r.device for r in recs] == ["neuron (trn2)"]
        d = queries.diff_runs(s, ids[("trn2", False)], ids[("trn3", False)])
        assert [m["line"] for m in d.moved] == ["profile trn2 -> trn3"]
