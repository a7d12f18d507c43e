"""Tiny checkpoints kept beside the CPU references (``tiny_checkpoint``): the bytes first built come back, every part
of the key misses when it changes, a corrupt entry is rebuilt, a failed build is never kept, and a warm architecture
run hits both caches."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from compat.results import DEFAULT_CHECKS, ArchitectureEntry
from compat.settings import get_settings
from worker.build.tiny_config import TinyConfigError
from worker.run.process.devices import resolve_device
from worker.run.reference.reference_cache import ReferenceCache, checkpoint_folder_cache
from worker.run.runner import checkpoints
from worker.run.runner.checkpoints import tiny_checkpoint
from worker.run.runner.runner import run_architecture

LLAMA = ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1)


@pytest.fixture
def cache(tmp_path: Path) -> ReferenceCache:
    return ReferenceCache(tmp_path / "checkpoints", 1 << 30)


def _files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_kept_checkpoint_comes_back_byte_for_byte(tmp_path: Path, cache: ReferenceCache) -> None:
    built = tiny_checkpoint(LLAMA, tmp_path / "a", seed=0, cache=cache)
    again = tiny_checkpoint(LLAMA, tmp_path / "b", seed=0, cache=cache)
    assert (built.cached, again.cached) == (False, True) and cache.info().entries == 1
    # The same bytes (so the reference's key, a digest of these files, is the same) and the same count.
    assert _files(again.path) == _files(built.path) and "model.safetensors" in _files(built.path)
    assert again.n_params == built.n_params > 0
    uncached = tiny_checkpoint(LLAMA, tmp_path / "c", seed=0, cache=None)
    assert not uncached.cached and _files(uncached.path) == _files(built.path)


def test_every_part_of_the_key_misses_when_it_changes(tmp_path: Path, cache: ReferenceCache,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    first = tiny_checkpoint(LLAMA, tmp_path / "first", seed=0, cache=cache)
    other_seed = tiny_checkpoint(LLAMA, tmp_path / "seed", seed=1, cache=cache)
    assert not other_seed.cached and _files(other_seed.path)["model.safetensors"] != \
        _files(first.path)["model.safetensors"]
    config = ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1,
                               config={"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                       "hidden_act": "gelu"})
    assert not tiny_checkpoint(config, tmp_path / "config", seed=0, cache=cache).cached
    monkeypatch.setenv("COMPAT_MAX_TINY_PARAMS", str(get_settings().max_tiny_params + 1))
    get_settings.cache_clear()
    assert not tiny_checkpoint(LLAMA, tmp_path / "bound", seed=0, cache=cache).cached
    monkeypatch.delenv("COMPAT_MAX_TINY_PARAMS")
    get_settings.cache_clear()
    monkeypatch.setattr(checkpoints, "BUILD_CODE_DIGEST", "0" * 64)  # an edit to the build stage's code
    assert not tiny_checkpoint(LLAMA, tmp_path / "code", seed=0, cache=cache).cached
    monkeypatch.undo()
    get_settings.cache_clear()
    assert tiny_checkpoint(LLAMA, tmp_path / "same", seed=0, cache=cache).cached


def test_a_corrupt_entry_is_built_again(tmp_path: Path, cache: ReferenceCache) -> None:
    built = tiny_checkpoint(LLAMA, tmp_path / "a", seed=0, cache=cache)
    (entry,) = cache.folder.glob("*.safetensors")
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF  # one flipped byte in the stored weights: its digest no longer matches
    entry.write_bytes(bytes(data))
    again = tiny_checkpoint(LLAMA, tmp_path / "b", seed=0, cache=cache)
    assert not again.cached and _files(again.path) == _files(built.path)
    assert tiny_checkpoint(LLAMA, tmp_path / "c", seed=0, cache=cache).cached  # rewritten by the rebuild


def test_a_failed_build_is_never_kept(tmp_path: Path, cache: ReferenceCache) -> None:
    broken = ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1,
                               config={"model_type": "llama", "hidden_size": -4})
    with pytest.raises((TinyConfigError, ValueError)):
        tiny_checkpoint(broken, tmp_path / "a", seed=0, cache=cache)
    assert cache.info().entries == 0


def test_a_warm_architecture_run_hits_both_caches_with_the_same_records(env_cache: ReferenceCache) -> None:
    dev = resolve_device("cpu")
    cold = run_architecture(LLAMA, dev, DEFAULT_CHECKS)
    assert checkpoint_folder_cache().info().entries == 1
    warm = run_architecture(LLAMA, dev, DEFAULT_CHECKS)
    assert {r.metrics.get("reference_cache") for r in warm if str(r.check) != "load"} == {"hit"}
    assert [(r.check, r.status, {k: v for k, v in r.metrics.items() if k != "reference_cache"}) for r in warm] == \
           [(r.check, r.status, {k: v for k, v in r.metrics.items() if k != "reference_cache"}) for r in cold]
