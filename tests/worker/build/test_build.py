"""Tiny checkpoints: seeded and deterministic, safetensors only, loadable the user's way, and runnable on CPU.

The representative hard set covers hybrids, MoE, MLA, tied embeddings, sliding windows and composite configs;
the whole registry is measured by bench/bench_build.py instead (too slow for the default suite).
"""

from __future__ import annotations

import hashlib

import pytest
import torch
import transformers
from safetensors.torch import load_file

from compat.settings import get_settings
from worker.build.build import BuiltModel, build_checkpoint
from worker.build.tiny_config import ConfigTooLarge
from worker.catalog.catalog import registry_entries

REGISTRY = {e.name: e for e in registry_entries()}
HARD_SET = [
    "LlamaForCausalLM",  # the baseline
    "GemmaForCausalLM",  # tied embeddings
    "Gemma3ForCausalLM",  # sliding/full layer pattern
    "MistralForCausalLM",  # sliding window
    "MixtralForCausalLM",  # MoE routing
    "DeepseekV3ForCausalLM",  # MLA + grouped MoE routing + dense prefix
    "JambaForCausalLM",  # Mamba/attention hybrid by period, MoE by period
    "BambaForCausalLM",  # Mamba-2/attention hybrid by index list
    "Qwen3NextForCausalLM",  # linear-attention hybrid
    "Llama4ForCausalLM",  # composite config (text part), MoE, chunked attention
    "Gemma3ForConditionalGeneration",  # composite config with a vision tower
    "CodeGenForCausalLM",  # partial rotary
]


def _digest(path) -> str:
    tensors = load_file(str(path / "model.safetensors"))
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def test_build_is_deterministic_per_seed_and_safetensors_only(tmp_path, isolated_settings):
    e = REGISTRY["MixtralForCausalLM"]
    a = build_checkpoint(e, tmp_path / "a", seed=0)
    b = build_checkpoint(e, tmp_path / "b", seed=0)
    c = build_checkpoint(e, tmp_path / "c", seed=1)
    assert isinstance(a, BuiltModel) and a.model_class == "MixtralForCausalLM"
    assert _digest(a.path) == _digest(b.path)
    assert _digest(a.path) != _digest(c.path)
    assert not list(a.path.glob("*.bin")) and not list(a.path.glob("*.pt"))
    assert a.n_params == sum(t.numel() for t in load_file(str(a.path / "model.safetensors")).values())
    assert a.n_params <= get_settings().max_tiny_params


def test_oversize_config_is_refused_before_anything_is_written(tmp_path, isolated_settings, monkeypatch):
    monkeypatch.setenv("COMPAT_MAX_TINY_PARAMS", "1000")
    get_settings.cache_clear()
    with pytest.raises(ConfigTooLarge):
        build_checkpoint(REGISTRY["LlamaForCausalLM"], tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("name", HARD_SET)
def test_hard_set_builds_loads_and_runs_deterministically_on_cpu(name, tmp_path, isolated_settings):
    built = build_checkpoint(REGISTRY[name], tmp_path / "m", seed=0)
    cls = getattr(transformers, built.model_class)
    model = cls.from_pretrained(built.path, device_map="cpu").eval()  # the path users take
    again = cls.from_pretrained(built.path, device_map="cpu").eval()
    vocab = built.config.get_text_config().vocab_size
    ids = torch.randint(3, vocab, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        first = model(input_ids=ids).logits
        second = model(input_ids=ids).logits
        reloaded = again(input_ids=ids).logits
    # Exact equality, no tolerance: the same float32 CPU program on the same weights must be bit-identical,
    # and a second load must not re-initialise any weight the checkpoint lacks.
    assert torch.equal(first, second)
    assert torch.equal(first, reloaded)
    assert first.shape[-1] >= vocab and torch.isfinite(first).all()
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert out.shape[-1] == ids.shape[-1] + 4
    model.train()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
