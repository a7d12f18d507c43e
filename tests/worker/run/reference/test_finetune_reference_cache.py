"""The lora and sft CPU references in the reference cache (issue 20): a warm run gives the cold run's records, every
key part misses when it changes, a corrupt entry is a miss, and nothing is stored beside a reference_fail."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from bitwise import assert_same

from compat.results import ArchitectureEntry, Check, ResultRecord, Status
from worker.build.build import build_checkpoint
from worker.judge import judge
from worker.run.process.devices import resolve_device
from worker.run.reference import finetune_reference, lora, reference, reference_cache, sft
from worker.run.reference.context import CheckContext
from worker.run.reference.finetune_reference import lora_reference, sft_reference
from worker.run.reference.reference import prepare_reference
from worker.run.reference.reference_cache import ReferenceCache
from worker.run.runner.runner import run_architecture

LLAMA = ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1)
FINETUNE = [Check.LORA, Check.SFT]
PARTS = {"lora": lora_reference, "sft": sft_reference}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint(LLAMA, tmp_path_factory.mktemp("ckpt") / "llama", seed=0).path


@pytest.fixture(scope="module")
def warm(ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object], dict[str, str]]:
    """A cache holding this checkpoint's forward, lora and sft entries (the cpu device, policy fp32), computed from a
    cold cache; with each part's computed reference and the name of the entry file it stored."""
    folder = tmp_path_factory.mktemp("warm") / "cache"
    ctx = _ctx(ckpt, ReferenceCache(folder, 1 << 30))
    computed, files = {}, {}
    for part, compute in PARTS.items():
        before = set(folder.glob("*.safetensors"))
        computed[part] = compute(ctx)
        (entry,) = set(folder.glob("*.safetensors")) - before
        files[part] = entry.name
    assert ctx.ref.cache_status == {"forward": "miss", "lora": "miss", "sft": "miss"}
    return folder, computed, files


@pytest.fixture(scope="module")
def warm_folder(warm: tuple[Path, dict[str, object], dict[str, str]]) -> Path:
    return warm[0]


@pytest.fixture
def cache(warm_folder: Path, tmp_path: Path) -> ReferenceCache:
    """A copy of the warm cache per test: what one test stores cannot make another's change hit."""
    shutil.copytree(warm_folder, tmp_path / "cache")
    return ReferenceCache(tmp_path / "cache", 1 << 30)


def _ctx(ckpt: Path, cache: ReferenceCache | None, *, seed: int = 0, device: str = "cpu") -> CheckContext:
    dev = resolve_device(device)
    return CheckContext(LLAMA.name, LLAMA.rank, dev, prepare_reference(ckpt, dev.policy, seed, cache=cache))


class _Missed(Exception):
    """Raised in place of computing a reference: the lookup before it missed (all a key-part test asks)."""


def _no_compute(*_: object) -> None:
    raise _Missed


def _status(ckpt: Path, cache: ReferenceCache, part: str, **kw: object) -> str:
    """``part``'s lookup with this checkpoint and these settings: "hit" or "miss". A miss is not computed (the key
    is what is under test; the cold/warm and corrupt-entry tests compute for real)."""
    return _lookup(_ctx(ckpt, cache, **kw), part)  # type: ignore[arg-type]


def _lookup(ctx: CheckContext, part: str) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(finetune_reference, "_lora_runs", _no_compute)
        mp.setattr(finetune_reference, "_sft_runs", _no_compute)
        with contextlib.suppress(_Missed):
            PARTS[part](ctx)
    return ctx.ref.cache_status[part]


def _metrics(records: list[ResultRecord]) -> list[tuple[str, str, dict[str, object]]]:
    return [(str(r.check), str(r.status), {k: v for k, v in r.metrics.items() if k != "reference_cache"})
            for r in records]


# --- (a) a warm run is the cold run ------------------------------------------------------------------------------


def test_cold_and_warm_runs_on_neuron_give_identical_records(env_cache: ReferenceCache) -> None:
    # The neuron device (policy bf16_matmul: fp32, policy and fp64 lora entries; TRL pads to 128 for it). The
    # cached CPU tensors are bit-identical and the device side is recomputed each time, so the verdicts and every
    # metric (losses, errors, targets) must be equal exactly, not within a tolerance.
    dev = resolve_device("neuron")
    cold = run_architecture(LLAMA, dev, FINETUNE)
    warm = run_architecture(LLAMA, dev, FINETUNE)
    assert [r.status for r in cold] == [Status.PASS, Status.PASS], [(r.reason, r.log) for r in cold]
    assert _metrics(cold) == _metrics(warm)
    assert [r.metrics["reference_cache"] for r in cold] == ["miss", "miss"]
    assert [r.metrics["reference_cache"] for r in warm] == ["hit", "hit"]
    assert warm[1].metrics["pad_to_multiple_of"] == 128
    assert env_cache.info().entries == 3  # forward, lora, sft


def test_a_hit_gives_back_the_computed_reference_bit_for_bit(ckpt: Path, cache: ReferenceCache) -> None:
    plain = _ctx(ckpt, None)
    want = {part: compute(plain) for part, compute in PARTS.items()}
    warm = _ctx(ckpt, cache)
    rng = torch.get_rng_state()
    got = {part: compute(warm) for part, compute in PARTS.items()}
    assert warm.ref.cache_status == {"forward": "hit", "lora": "hit", "sft": "hit"}
    assert_same(got, want)  # targets, the adapters' initial weights, fp32/policy/fp64 steps, loss curves
    assert torch.equal(torch.get_rng_state(), rng)  # a hit draws nothing; a miss restores what it drew


# --- (b) every key part misses when it changes ------------------------------------------------------------------


@pytest.mark.parametrize("part", list(PARTS))
def test_a_changed_config_misses(ckpt: Path, cache: ReferenceCache, tmp_path: Path, part: str) -> None:
    other = tmp_path / "edited"
    shutil.copytree(ckpt, other)
    config = json.loads((other / "config.json").read_text())
    config["rms_norm_eps"] = config["rms_norm_eps"] * 10
    (other / "config.json").write_text(json.dumps(config))
    assert _status(other, cache, part) == "miss"
    assert _status(ckpt, cache, part) == "hit"


def test_changed_weights_miss(ckpt: Path, cache: ReferenceCache, tmp_path: Path) -> None:
    other = build_checkpoint(LLAMA, tmp_path / "seed1", seed=1).path  # the same config, other weights
    assert _status(other, cache, "lora") == "miss"


@pytest.mark.parametrize("part", list(PARTS))
def test_a_changed_seed_misses_even_with_the_same_inputs(ckpt: Path, cache: ReferenceCache, part: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    make = reference.make_inputs
    monkeypatch.setattr(reference, "make_inputs", lambda vocab, _seed, config=None: make(vocab, 0, config))
    assert _status(ckpt, cache, part, seed=1) == "miss"


def test_changed_inputs_miss(ckpt: Path, cache: ReferenceCache, other_inputs: None) -> None:
    assert _status(ckpt, cache, "sft") == "miss"  # the dataset is the inputs' token ids


@pytest.mark.parametrize(("module", "name", "value", "part"), [
    (lora, "LORA_RANK", 2, "lora"),
    (lora, "LORA_ALPHA", 16, "lora"),
    (reference, "LR", 1e-2, "lora"),  # the AdamW step of the lora check (reference.train_step reads it)
    (sft, "SFT_STEPS", 1, "sft"),
    (sft, "LR", 1e-2, "sft"),
    (finetune_reference, "CODE_DIGEST", "edited", "lora"),
    (finetune_reference, "CODE_DIGEST", "edited", "sft"),
], ids=["lora-rank", "lora-alpha", "lora-lr", "sft-steps", "sft-lr", "lora-code", "sft-code"])
def test_a_changed_check_parameter_misses(ckpt: Path, cache: ReferenceCache, monkeypatch: pytest.MonkeyPatch,
                                          module: object, name: str, value: object, part: str) -> None:
    monkeypatch.setattr(module, name, value)
    assert _status(ckpt, cache, part) == "miss"


def test_changed_lora_targets_miss(ckpt: Path, cache: ReferenceCache, monkeypatch: pytest.MonkeyPatch) -> None:
    discover = lora.discover_targets

    def q_only(model: torch.nn.Module) -> lora.Targets:
        found = discover(model)
        return lora.Targets([n for n in found.names if n.endswith("q_proj")], found.rule)

    monkeypatch.setattr(lora, "discover_targets", q_only)
    ctx = _ctx(ckpt, cache)
    assert len(lora_reference(ctx)["targets"].names) >= 1 and ctx.ref.cache_status["lora"] == "miss"


def test_changed_sft_padding_misses(ckpt: Path, cache: ReferenceCache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sft, "device_padding", lambda _device: 32)  # as TRL would pad for another device
    ctx = _ctx(ckpt, cache)
    assert sft_reference(ctx)["pad_to_multiple_of"] == 32 and ctx.ref.cache_status["sft"] == "miss"


@pytest.mark.parametrize("library", ["python", *reference_cache.LIBRARIES, *finetune_reference.SFT_LIBRARIES])
def test_each_library_version_is_part_of_the_key(ckpt: Path, cache: ReferenceCache, library: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if library == "python":
        monkeypatch.setattr(reference_cache, "_python_version", lambda: "3.99.0")
    else:
        real = reference_cache._dist_version
        monkeypatch.setattr(reference_cache, "_dist_version", lambda n: "99.0" if n == library else real(n))
    ctx = _ctx(ckpt, cache)
    for part in PARTS:
        _lookup(ctx, part)
    # the SFT run's own libraries are in its key alone; the key's libraries (and Python) in every entry's
    want = "hit" if library in finetune_reference.SFT_LIBRARIES else "miss"
    assert ctx.ref.cache_status == {"forward": want, "lora": want, "sft": "miss"}


# --- (c) a damaged entry is a miss; a reference_fail stores nothing ---------------------------------------------


# Every damage for lora (cheap); one for sft: reading a damaged file is the cache's own code, the same for every part
# (tests/worker/run/reference/test_reference_cache.py damages forward entries too).
@pytest.mark.parametrize(("part", "damage"), [*(("lora", d) for d in ("truncate", "flip", "garbage", "empty")),
                                              ("sft", "flip")])
def test_a_corrupt_entry_is_a_miss_and_is_rewritten(ckpt: Path, cache: ReferenceCache, part: str, damage: str,
                                                    warm: tuple[Path, dict[str, object], dict[str, str]]) -> None:
    # The part's entry as a cold run stored it, and the reference that run computed (the module's warm-up).
    _, computed, files = warm
    want = computed[part]
    entry = cache.folder / files[part]
    data = entry.read_bytes()
    entry.write_bytes({"truncate": data[: len(data) // 2], "flip": data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:],
                       "garbage": b"\x00not a safetensors file" * 10, "empty": b""}[damage])
    ctx = _ctx(ckpt, cache)
    assert_same(PARTS[part](ctx), want)
    assert ctx.ref.cache_status[part] == "miss"
    assert _status(ckpt, cache, part) == "hit"  # the recomputed reference replaced the damaged entry


def test_nothing_is_stored_beside_a_reference_fail(ckpt: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner never runs a check after a failed self-agreement; a caller that does still caches nothing.
    def disagree(*_: object) -> judge.Verdict:
        return judge.Verdict(Status.REFERENCE_FAIL, {}, "nondeterministic: the CPU reference disagrees with itself")

    monkeypatch.setattr(judge, "reference_determinism", disagree)
    cache = ReferenceCache(tmp_path / "cache", 1 << 30)
    ctx = _ctx(ckpt, cache)
    lora_reference(ctx)
    assert not ctx.ref.determinism.passed and ctx.ref.cache_status["lora"] == "miss"
    assert cache.info().entries == 0
