"""The content-addressed CPU reference cache (issue 20): every key part misses when it changes, a hit gives back the
same tensors, a corrupt entry is a miss, the size bound evicts the oldest, and verdicts do not depend on it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from bitwise import assert_same
from typer.testing import CliRunner

from cli.app import app
from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Status
from compat.settings import get_settings
from worker.build.build import build_checkpoint
from worker.judge import judge
from worker.run.process.devices import resolve_device
from worker.run.reference import reference, reference_cache
from worker.run.reference.reference import prepare_reference
from worker.run.reference.reference_cache import ReferenceCache, default_cache
from worker.run.runner.runner import run_architecture

LLAMA = ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1)
GPT2 = ArchitectureEntry(name="GPT2LMHeadModel", model_type="gpt2", rank=2)
POLICY = "bf16_matmul"  # the simulated neuron's policy: the forward entry holds fp32, policy and fp64 logits


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint(LLAMA, tmp_path_factory.mktemp("ckpt") / "llama", seed=0).path


@pytest.fixture
def cache(tmp_path: Path) -> ReferenceCache:
    return ReferenceCache(tmp_path / "cache", 1 << 30)


@pytest.fixture(scope="module")
def warm_folders(ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Per policy, a cache holding only this checkpoint's forward entry (seed 0), computed once from a cold cache."""
    out = {}
    for policy in (POLICY, "fp32"):
        folder = tmp_path_factory.mktemp(f"warm-{policy}") / "cache"
        ref = prepare_reference(ckpt, policy, 0, cache=ReferenceCache(folder, 1 << 30))
        assert ref.cache_status == {"forward": "miss"}
        out[policy] = folder
    return out


def _warm(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path], policy: str = POLICY) -> None:
    """``cache`` as the first lookup of (``ckpt``, ``policy``, seed 0) leaves it: the module's cold-computed entry,
    copied into this test's empty folder (the same bytes as computing it here; no test sees another's stores)."""
    assert cache.info().entries == 0
    shutil.copytree(warm_folders[policy], cache.folder, dirs_exist_ok=True)


def _status(ckpt: Path, cache: ReferenceCache, policy: str = POLICY, seed: int = 0) -> str:
    return prepare_reference(ckpt, policy, seed, cache=cache).cache_status["forward"]


def test_a_hit_gives_back_identical_results_and_trace(ckpt: Path, cache: ReferenceCache) -> None:
    plain = prepare_reference(ckpt, POLICY, 0)
    plain_gen, plain_train = plain.generation(), plain.training()
    cold = prepare_reference(ckpt, POLICY, 0, cache=cache)
    cold.generation(), cold.training()
    assert cold.cache_status == {"forward": "miss", "generate": "miss", "train": "miss"}
    warm = prepare_reference(ckpt, POLICY, 0, cache=cache)
    assert warm.cache_status == {"forward": "hit"}
    for ref in (cold, warm):
        assert_same(ref.logits, plain.logits)
        assert_same(ref.policy_logits, plain.policy_logits)
        assert_same(ref.golden_logits, plain.golden_logits)
        assert ref.determinism.status == Status.PASS and ref.determinism.metrics == plain.determinism.metrics
        assert (ref._golden_model is None) == (plain._golden_model is None)
    assert warm.generation() == plain_gen
    assert_same(warm.training(), plain_train)
    assert warm.cache_status == {"forward": "hit", "generate": "hit", "train": "hit"}
    assert warm.ops == plain.ops  # the op trace (forward, generate, train) is cached with each part
    assert cache.info().entries == 3


def test_a_changed_config_misses(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path],
                                 tmp_path: Path) -> None:
    _warm(ckpt, cache, warm_folders)
    other = tmp_path / "edited"
    shutil.copytree(ckpt, other)
    config = json.loads((other / "config.json").read_text())
    config["rms_norm_eps"] = config["rms_norm_eps"] * 10
    (other / "config.json").write_text(json.dumps(config))
    assert _status(other, cache) == "miss"
    assert _status(ckpt, cache) == "hit"


def test_changed_weights_miss(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path],
                              tmp_path: Path) -> None:
    _warm(ckpt, cache, warm_folders)
    other = build_checkpoint(LLAMA, tmp_path / "seed1", seed=1).path  # the same config, other weights
    assert _status(other, cache) == "miss"


def test_a_changed_seed_misses_even_with_the_same_inputs(ckpt: Path, cache: ReferenceCache,
                                                         warm_folders: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    make = reference.make_inputs
    monkeypatch.setattr(reference, "make_inputs", lambda vocab, _seed, config=None: make(vocab, 0, config))
    _warm(ckpt, cache, warm_folders)
    assert _status(ckpt, cache, seed=1) == "miss"


def test_changed_inputs_miss(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path],
                             request: pytest.FixtureRequest) -> None:
    _warm(ckpt, cache, warm_folders)
    request.getfixturevalue("other_inputs")  # patched after the warm-up: the entry exists, the inputs differ
    assert _status(ckpt, cache) == "miss"


def test_a_changed_policy_misses(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path]) -> None:
    _warm(ckpt, cache, warm_folders)
    assert _status(ckpt, cache, policy="fp32") == "miss"


def test_changed_check_parameters_miss(ckpt: Path, cache: ReferenceCache, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = prepare_reference(ckpt, "fp32", 0, cache=cache)
    cold.generation(), cold.training()
    monkeypatch.setattr(reference, "NEW_TOKENS", 4)  # generate: new tokens
    monkeypatch.setattr(reference, "LR", 1e-2)  # train: the AdamW step
    ref = prepare_reference(ckpt, "fp32", 0, cache=cache)
    assert len(ref.generation()[0]) == 4
    ref.training()
    assert ref.cache_status == {"forward": "hit", "generate": "miss", "train": "miss"}


@pytest.mark.parametrize("library", ["python", *reference_cache.LIBRARIES])
def test_each_library_version_is_part_of_the_key(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path],
                                                 library: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _warm(ckpt, cache, warm_folders, policy="fp32")
    if library == "python":
        monkeypatch.setattr(reference_cache, "_python_version", lambda: "3.99.0")
    else:
        real = reference_cache._dist_version
        monkeypatch.setattr(reference_cache, "_dist_version", lambda n: "99.0" if n == library else real(n))
    assert _status(ckpt, cache, policy="fp32") == "miss"


def test_the_reference_code_is_part_of_the_key(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _warm(ckpt, cache, warm_folders, policy="fp32")
    monkeypatch.setattr(reference, "CODE_DIGEST", "edited")
    assert _status(ckpt, cache, policy="fp32") == "miss"


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_corrupt_entry_is_a_miss_and_is_rewritten(ckpt: Path, cache: ReferenceCache, warm_folders: dict[str, Path],
                                                    damage: str) -> None:
    _warm(ckpt, cache, warm_folders, policy="fp32")
    (entry,) = cache.folder.glob("*.safetensors")
    data = entry.read_bytes()
    entry.write_bytes({"truncate": data[: len(data) // 2], "flip": data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:],
                       "garbage": b"\x00not a safetensors file" * 10, "empty": b""}[damage])
    ref = prepare_reference(ckpt, "fp32", 0, cache=cache)
    assert ref.cache_status == {"forward": "miss"} and ref.determinism.passed
    assert_same(ref.logits, prepare_reference(ckpt, "fp32", 0).logits)
    assert _status(ckpt, cache, policy="fp32") == "hit"  # the recomputed reference replaced the damaged entry


def test_a_reference_fail_is_never_cached(ckpt: Path, cache: ReferenceCache, monkeypatch: pytest.MonkeyPatch) -> None:
    def disagree(*_: object) -> judge.Verdict:
        return judge.Verdict(Status.REFERENCE_FAIL, {}, "nondeterministic: the CPU reference disagrees with itself")

    monkeypatch.setattr(judge, "reference_determinism", disagree)
    for _ in range(2):
        ref = prepare_reference(ckpt, "fp32", 0, cache=cache)
        assert not ref.determinism.passed and ref.cache_status == {"forward": "miss"}
    assert cache.info().entries == 0


def test_the_size_bound_evicts_the_least_recently_used(tmp_path: Path) -> None:
    small = ReferenceCache(tmp_path / "c", 1 << 30)
    t = {"x": torch.arange(1000, dtype=torch.float64)}
    for i, key in enumerate(["a", "b", "c"]):
        assert small.put(key, t, {"i": i})
        os.utime(small.folder / f"{key}.safetensors", (1000 + i, 1000 + i))
    size = (small.folder / "a.safetensors").stat().st_size
    assert small.get("a") is not None  # a hit makes "a" the most recently used; "b" is now the oldest
    small.max_bytes = 3 * size
    assert small.put("d", t, {"i": 3})
    assert small.get("b") is None
    assert all(small.get(k) is not None for k in ("a", "c", "d"))
    assert small.info().entries == 3 and small.info().size_bytes <= small.max_bytes
    small.put("e", t, {})  # an entry round-trips its tensors and its metadata
    got = small.get("e")
    assert got is not None and got[1] == {} and torch.equal(got[0]["x"], t["x"])


def test_the_cache_can_be_switched_off(env_cache: ReferenceCache, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_cache() is not None and default_cache().folder == env_cache.folder  # type: ignore[union-attr]
    monkeypatch.setenv("COMPAT_REFERENCE_CACHE", "0")
    get_settings.cache_clear()
    assert default_cache() is None


def _statuses(device: str) -> list[list[tuple[str, str]]]:
    dev = resolve_device(device)
    return [[(str(r.check), str(r.status)) for r in run_architecture(e, dev, DEFAULT_CHECKS)] for e in (LLAMA, GPT2)]


def test_verdicts_are_the_same_with_and_without_the_cache(env_cache: ReferenceCache,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPAT_REFERENCE_CACHE", "0")
    get_settings.cache_clear()
    off = _statuses("cpu")
    assert env_cache.info().entries == 0
    monkeypatch.delenv("COMPAT_REFERENCE_CACHE")
    get_settings.cache_clear()
    dev = resolve_device("cpu")
    cold = [run_architecture(e, dev, DEFAULT_CHECKS) for e in (LLAMA, GPT2)]
    warm = [run_architecture(e, dev, DEFAULT_CHECKS) for e in (LLAMA, GPT2)]
    for runs, want in ((cold, "miss"), (warm, "hit")):
        assert [[(str(r.check), str(r.status)) for r in recs] for recs in runs] == off
        assert {r.metrics.get("reference_cache") for recs in runs for r in recs if str(r.check) != "load"} == {want}
    for c, w in zip(cold, warm, strict=True):  # the same numbers, not only the same statuses
        assert [{k: v for k, v in r.metrics.items() if k != "reference_cache"} for r in c] == \
               [{k: v for k, v in r.metrics.items() if k != "reference_cache"} for r in w]


def test_compat_cache_info_and_clear(env_cache: ReferenceCache) -> None:
    env_cache.put("k" * 64, {"x": torch.ones(3)}, {})
    runner = CliRunner()
    out = runner.invoke(app, ["cache", "info"])
    assert out.exit_code == 0 and "1 entries" in out.output and str(env_cache.folder.name) in out.output
    out = runner.invoke(app, ["cache", "clear"])
    assert out.exit_code == 0 and "1 entries deleted" in out.output
    assert env_cache.info().entries == 0
