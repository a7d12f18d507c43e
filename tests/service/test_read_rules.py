"""The read rules of service.queries over stored runs: which run is the latest, the headline and the baseline (finished
only; full vs selection; ranked vs registry), reaping lost owners on read, the unranked headline, and bad input
answered 404/422 by every read route (never a 500, never a silent empty answer)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from service_seed import ARCHS, CHECKS, make_run, rec, seed, times
from sqlalchemy import update

from compat.results import Scope, Status, Trigger
from service import db, queries, runs
from service.lifecycle import reap, this_host
from service.models import Run
from service.store import RunStateError, Store


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # exited and reaped: its pid names no process (until reused, which a test run cannot wait for)
    return proc.pid


def _started(store: Store, *, started: datetime, scope: Scope = Scope.FULL, source: str = "snapshot",
             trigger: Trigger = Trigger.MANUAL, archs=ARCHS) -> str:
    run = make_run(started=started, catalog_source=source, trigger=trigger).model_copy(update={"scope": scope})
    store.start_run(run, list(archs), [(a.name, "neuron", str(c)) for a in archs for c in CHECKS])
    return run.id


def test_latest_and_headline_are_the_newest_finished_full_run(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    t = times(5)
    full = seed(store, started=t[0])
    selection = _started(store, started=t[1], scope=Scope.SELECTION, archs=ARCHS[:1])
    store.add_results(selection, [rec(ARCHS[0].name, c, Status.ERROR) for c in CHECKS])
    store.finish_run(selection)
    running = _started(store, started=t[2])  # owned by this (live) process: still running
    dead = _started(store, started=t[3])
    with db.session_scope(sqlite_url) as s:
        s.execute(update(Run).where(Run.id == dead).values(owner_pid=_dead_pid()))
    sub = _started(store, started=t[4], trigger=Trigger.SUBMISSION)
    store.finish_run(sub)
    with db.session_scope(sqlite_url) as s:
        assert runs.latest_run(s, "neuron").id == full  # the headline: not the selection, running or dead run
        assert runs.latest_run(s, "neuron", scope=None).id == selection  # the latest of any scope
        assert [c.run_id for c in queries.coverage(s).items] == [full]
        states = {r.id: r.state for r in queries.list_runs(s).items}  # a read: the dead owner's run is reaped
    assert states[running] == "running" and states[dead] == "interrupted"
    with db.session_scope(sqlite_url) as s:
        # `show`'s latest results of an architecture: the newest finished run that has it (the selection run).
        assert {r.status for r in runs.latest_results_in(s, ARCHS[0].name, "neuron")} == {Status.ERROR}
        # A selection is compared with the newest finished run of either scope, over its own selection only.
        assert runs.baseline_run(s, selection).id == full
        diff = queries.diff_runs(s, full, selection)
        assert [e.architecture for e in diff.regressions] == [ARCHS[0].name] and diff.removed == []


def test_baseline_is_finished_same_trigger_full_and_ranked_alike(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    t = times(5)
    n1 = seed(store, started=t[0], trigger=Trigger.NIGHTLY)
    registry = make_run(started=t[1], catalog_source="registry", trigger=Trigger.NIGHTLY)
    store.start_run(registry, ARCHS, [])
    store.finish_run(registry.id)
    m1 = seed(store, started=t[2])
    _started(store, started=t[3], trigger=Trigger.NIGHTLY)  # running: never a baseline
    n2 = seed(store, started=t[4], trigger=Trigger.NIGHTLY)
    with db.session_scope(sqlite_url) as s:
        assert runs.baseline_run(s, n2, trigger="nightly").id == n1  # not the registry one, not the running one
        assert runs.baseline_run(s, n2).id == m1  # any trigger but submission
        assert runs.baseline_run(s, registry.id, trigger="nightly") is None  # unranked vs ranked: not compared
        assert queries.previous_run_id(s, n2) == n1


def test_reap_marks_a_silent_run_and_spares_a_live_one(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    live = _started(store, started=times(1)[0])
    with db.session_scope(sqlite_url) as s:
        later = datetime.now(UTC) + timedelta(hours=1)
        assert reap(s, now=later, silence_s=7200) == []  # owner alive, heartbeat recent enough
        # Another host's run: its pid cannot be checked here, only its silence.
        s.execute(update(Run).where(Run.id == live).values(owner_host=this_host() + "-other"))
        [(rid, why)] = reap(s, now=later, silence_s=60)
    assert rid == live and why.startswith("no heartbeat for ")
    with pytest.raises(RunStateError, match="cannot resume"):
        store.resume_run(seed(store, started=times(2)[1]))  # complete: nothing to resume


def test_an_unranked_catalog_has_no_top_n_and_says_so(sqlite_url: str, client) -> None:  # noqa: ANN001
    store = Store(client.app.state.settings.database_url)
    run = make_run(catalog_source="registry")
    store.start_run(run, ARCHS, [(a.name, "neuron", str(c)) for a in ARCHS for c in CHECKS])
    store.add_results(run.id, [rec(a.name, c) for a in ARCHS for c in CHECKS])
    store.finish_run(run.id)
    cov = client.get("/api/v1/coverage", params={"top_n": 2}).json()["items"][0]
    assert (cov["top_n"], cov["ranked"], cov["total"]) == (None, False, len(ARCHS))
    assert cov["scope_label"] == "unranked: Transformers' registry, alphabetical"
    declared = client.get("/api/v1/coverage/declared", params={"top_n": 2}).json()
    assert declared["top_n"] is None and declared["total"] == len(ARCHS) and not declared["ranked"]


@pytest.mark.parametrize(("path", "params", "status"), [
    ("/api/v1/coverage", {"device": "tpu"}, 404),
    ("/api/v1/coverage", {"run_id": "nope"}, 404),
    ("/api/v1/coverage/history", {"device": "tpu"}, 404),
    ("/api/v1/architectures", {"device": "tpu"}, 404),
    ("/api/v1/architectures", {"check": "frward"}, 422),
    ("/api/v1/runs", {"device": "tpu"}, 404),
    ("/api/v1/runs/nope", {}, 404),
    ("/api/v1/blockers", {"device": "tpu"}, 404),
    ("/api/v1/blockers", {"run_id": "nope"}, 404),
    ("/api/v1/diff", {"a": "nope", "b": "nope2"}, 404),
    ("/api/v1/architectures", {"device": "bad device"}, 422),
    ("/blockers", {"device": "tpu"}, 404),
    ("/matrix", {"device": "tpu"}, 404),
    ("/matrix", {"check": "frward"}, 404),
    ("/runs/nope", {}, 404),
])
def test_every_read_route_answers_bad_input_with_404_or_422(client, path: str, params: dict, status: int) -> None:  # noqa: ANN001
    seed(Store(client.app.state.settings.database_url))
    res = client.get(path, params=params)
    assert res.status_code == status, res.text
    if path.startswith("/api/"):
        body = res.json()
        assert body.get("error") or body.get("detail"), res.text  # says what was wrong


def test_a_run_from_before_owners_were_recorded_is_reaped_by_its_silence_since_start(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    old = _started(store, started=datetime.now(UTC) - timedelta(days=2))
    with db.session_scope(sqlite_url) as s:
        s.execute(update(Run).where(Run.id == old).values(owner_host=None, owner_pid=None, heartbeat=None))
    [(rid, why)] = store.reap()
    assert rid == old and why.startswith("no heartbeat for ")
    with db.session_scope(sqlite_url) as s:
        assert s.get(Run, old).state == "interrupted"


def test_a_per_model_run_is_not_the_class_verdict(sqlite_url: str) -> None:
    """`compat sweep --models` (catalog source "corpus") judges one model's own config: a newer per-model run of an
    architecture must not replace the class sweep's results on its page, badge and `show` (issue 33: "the class
    verdict stays as it is"); the nightly runs the per-model sweep after the class sweep, so this is every night."""
    store = Store(sqlite_url)
    t = times(2)
    full = seed(store, started=t[0])
    per_model = _started(store, started=t[1], scope=Scope.SELECTION, source="corpus", archs=ARCHS[:1])
    store.add_results(per_model, [rec(ARCHS[0].name, c, Status.ERROR) for c in CHECKS])
    store.finish_run(per_model)
    with db.session_scope(sqlite_url) as s:
        assert set(runs.latest_runs_of(s, ARCHS[0].name).values()) == {full}
        assert Status.ERROR not in {r.status for r in runs.latest_results_in(s, ARCHS[0].name, "neuron")}
