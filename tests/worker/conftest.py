"""Fixtures of the harness tests (every stage and the orchestration layer): offline, isolated settings, a store.

Heavy fixtures (a real small sweep) are session-scoped so the harness test budget (~150 s) holds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from compat.settings import get_settings

# Shared stand-ins (tests/helpers: e.g. passing_runner, a COMPAT_RUN_HOOK) importable by name, in this process and
# in the pool's spawned workers (multiprocessing hands a spawned child the parent's sys.path).
_HELPERS = str(Path(__file__).parents[1] / "helpers")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # No test may touch the internet.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@pytest.fixture
def isolated_settings(tmp_path, monkeypatch):
    """Settings whose var_dir (and so the snapshot path) is a fresh temp dir."""
    monkeypatch.setenv("COMPAT_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.delenv("COMPAT_CATALOG_SNAPSHOT", raising=False)
    monkeypatch.delenv("COMPAT_MAX_TINY_PARAMS", raising=False)
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'compat.db'}"
