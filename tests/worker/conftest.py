"""Fixtures of the worker tests: tiny pool settings and (until W1's builder lands) nothing else.

Heavy fixtures (a real small sweep) are session-scoped so the worker test budget (~150 s) holds.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # No test may touch the internet.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
