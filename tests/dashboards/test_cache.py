"""The page cache serves repeat views from memory and recomputes after any write through the store."""

from __future__ import annotations

from seed_store import CATALOG, seed_sweep

from compat.results import Check, DeviceInfo, ResultRecord, RunInfo, Status
from dashboards.cache import PageCache


def test_cache_hits_until_the_store_changes(tmp_path) -> None:  # noqa: ANN001
    from service import db
    from service.store import Store

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    ids = seed_sweep(store)
    cache, calls = PageCache(), []

    def view() -> int:
        with db.session_scope(url) as s:
            return cache.get(s, "k", lambda: calls.append(1) or len(calls))

    assert view() == 1 and view() == 1 and cache.hits == 1
    # Re-delivering an existing key keeps its row id: only the run's data version reveals the write.
    rec = ResultRecord(architecture=CATALOG[0][0], rank=1, device="neuron", check=Check.LOAD, status=Status.OOM)
    store.add_results(ids["neuron_latest"], [rec])
    assert view() == 2
    run = RunInfo(device=DeviceInfo(name="neuron"))
    store.start_run(run, [], [])  # a new, empty run changes the headline's "in progress" too
    assert view() == 3
    store.finish_run(run.id)
    assert view() == 4 and view() == 4
    assert cache.misses == 4 and cache.hits == 2
