"""Settings every test shares: the CPU reference cache (worker/run/reference/reference_cache.py) is off and out of ./var.

A test that measures the cache turns it on in its own temp folder (tests/worker/run/reference/test_reference_cache.py); every
other test recomputes its references, as before the cache, so no test's records depend on which ran first.
Under `make test`'s `pytest -n 2 --dist loadgroup`, tests that share costly state are kept on one worker (below).
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from compat.settings import get_settings


@pytest.fixture(autouse=True, scope="session")
def _reference_cache_off(tmp_path_factory: pytest.TempPathFactory):
    # os.environ, not monkeypatch (function-scoped): pool workers and Celery processes started by tests inherit it.
    saved = {k: os.environ.get(k) for k in ("COMPAT_REFERENCE_CACHE", "COMPAT_REFERENCE_CACHE_DIR")}
    os.environ["COMPAT_REFERENCE_CACHE"] = "0"
    os.environ["COMPAT_REFERENCE_CACHE_DIR"] = str(tmp_path_factory.mktemp("reference-cache"))
    get_settings.cache_clear()
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    get_settings.cache_clear()


# pytest -n 2 --dist loadgroup (`make test`): tests sharing costly state run on one worker, so it is built once.
# Session- or module-scoped fixtures only set up a check of a running server: cheap, shared by whole directories.
_CHEAP_SHARED = frozenset({"pg_user", "shared_redis"})
_TESTS = Path(__file__).parent


def _shared_state(item: pytest.Item) -> set[str]:
    """What ``item`` shares with other tests and would build again on another worker: its module- or
    session-scoped fixtures (named by where they are defined), and the process-wide cached functions its module
    holds (``functools.cache``: tests/backend/two_ranks.py's shared_run, test_finetune_checks' sweeps)."""
    out = set()
    for name, defs in item._fixtureinfo.name2fixturedefs.items():  # noqa: SLF001 - pytest's own fixture closure
        for d in defs:
            if d.scope in ("module", "package", "session") and d.baseid not in ("", "tests") \
                    and name not in _CHEAP_SHARED:
                out.add(f"{d.baseid}::{name}")
    module = getattr(item, "module", None)
    for value in vars(module).values() if module is not None else ():
        fn = inspect.unwrap(value) if hasattr(value, "cache_info") else None
        if inspect.isfunction(fn) and _TESTS in Path(inspect.getfile(fn)).parents:
            out.add(f"{fn.__module__}.{fn.__qualname__}")
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``, one ``xdist_group`` per set of tests connected by shared state (a test using two
    shared things joins their groups); every other test is scheduled on its own. A test's own mark wins."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers by --dist loadgroup
        return
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    shared = {}
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (things := sorted(_shared_state(item))):
            shared[item] = things
            for thing in things[1:]:
                parent[root(thing)] = root(things[0])
    for item, things in shared.items():
        item.add_marker(pytest.mark.xdist_group(root(things[0])))
