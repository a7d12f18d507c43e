"""Settings every test shares: the CPU reference cache (worker/run/reference/reference_cache.py) is off and out of ./var.

A test that measures the cache turns it on in its own temp folder (tests/worker/run/reference/test_reference_cache.py); every
other test recomputes its references, as before the cache, so no test's records depend on which ran first.
"""

from __future__ import annotations

import os

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
