"""Fixtures of the stage-3 (run) tests: the reference cache turned on in a test's own folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from compat.settings import get_settings
from worker.run.reference import reference
from worker.run.reference.reference_cache import ReferenceCache, folder_cache


@pytest.fixture
def env_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReferenceCache]:
    """The cache the runner finds through the settings: tests/conftest.py turns it off for every test; this turns
    it on, in the test's own folder."""
    monkeypatch.setenv("COMPAT_REFERENCE_CACHE_DIR", str(tmp_path / "env-cache"))
    monkeypatch.delenv("COMPAT_REFERENCE_CACHE", raising=False)
    get_settings.cache_clear()
    yield folder_cache()
    get_settings.cache_clear()


@pytest.fixture
def other_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reference built after this sees inputs that differ from the usual ones in one token id (a cache key
    part changed, nothing else)."""
    make = reference.make_inputs

    def other_ids(vocab: int, seed: int, config: object = None) -> dict[str, torch.Tensor]:
        inputs = make(vocab, seed, config)
        inputs["input_ids"] = inputs["input_ids"].clone()
        inputs["input_ids"][0, 0] = (inputs["input_ids"][0, 0] % 500) + 1
        return inputs

    monkeypatch.setattr(reference, "make_inputs", other_ids)
