"""Tiny configs keep each architecture's features (hybrid layers, MoE, windows, rope scaling, ties) and stay small."""

from __future__ import annotations

import resource

import pytest
from transformers import LlamaConfig

from compat.results import ArchitectureEntry
from compat.settings import get_settings
from worker.build.tiny_config import ConfigTooLarge, TinyConfigError, count_params, shrink
from worker.catalog.catalog import registry_entries

REGISTRY = {e.name: e for e in registry_entries()}


def entry(name: str, **kw) -> ArchitectureEntry:
    return REGISTRY[name].model_copy(update=kw)


def test_generic_shrink_is_small_and_bounded(isolated_settings):
    cfg = shrink(entry("LlamaForCausalLM"))
    assert cfg.hidden_size == 64 and cfg.num_hidden_layers == 2 and cfg.vocab_size == 1024
    assert cfg.num_attention_heads == 4 and cfg.hidden_size // cfg.num_attention_heads == 16
    assert 10_000 < count_params(cfg) <= get_settings().max_tiny_params
    assert cfg.architectures == ["LlamaForCausalLM"]


def test_hybrid_layer_patterns_keep_every_kind_of_layer(isolated_settings):
    jamba = shrink(entry("JambaForCausalLM"))
    kinds = {i % jamba.attn_layer_period == jamba.attn_layer_offset for i in range(jamba.num_hidden_layers)}
    assert kinds == {True, False}  # attention and Mamba layers both survive the cut
    granite = shrink(entry("GraniteMoeHybridForCausalLM"))
    assert {"linear_attention", "full_attention"} <= set(granite.layer_types)
    nemotron_h = shrink(entry("NemotronHForCausalLM"))
    assert len(set(nemotron_h.layers_block_type)) >= 3  # mamba, attention and MoE/MLP blocks
    bamba = shrink(entry("BambaForCausalLM"))
    assert bamba.attn_layer_indices and len(bamba.attn_layer_indices) < bamba.num_hidden_layers


def test_moe_routing_is_kept_small(isolated_settings):
    mixtral = shrink(entry("MixtralForCausalLM"))
    assert mixtral.num_local_experts == 4 and mixtral.num_experts_per_tok == 2
    ds = shrink(entry("DeepseekV3ForCausalLM"))
    assert ds.n_routed_experts == 4 and ds.first_k_dense_replace <= 1 < ds.num_hidden_layers
    assert ds.n_routed_experts % ds.n_group == 0 and ds.topk_group <= ds.n_group
    assert ds.qk_head_dim == ds.qk_nope_head_dim + ds.qk_rope_head_dim  # MLA dims stay consistent
    qwen = shrink(entry("Qwen2MoeForCausalLM"))
    assert qwen.num_experts == 4 and qwen.num_experts_per_tok == 2
    # Random router jitter would make two float32 CPU forwards differ: it is zeroed.
    jittery = shrink(entry("MixtralForCausalLM", config={
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "router_jitter_noise": 0.1,
        "num_local_experts": 8, "num_experts_per_tok": 2}))
    assert jittery.router_jitter_noise == 0.0


def test_sliding_window_is_shorter_than_a_generation(isolated_settings):
    mistral = shrink(entry("MistralForCausalLM", config={
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096,
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8}))
    assert mistral.sliding_window == 16
    assert mistral.num_key_value_heads == 2  # grouped-query attention stays grouped
    gemma3 = shrink(entry("Gemma3ForCausalLM"))
    assert {"sliding_attention", "full_attention"} <= set(gemma3.layer_types)


def test_tied_embeddings_and_rope_scaling_of_a_hub_config_are_kept(isolated_settings):
    hub_llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
                 "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": [128001, 128009],
                 "tie_word_embeddings": True, "torch_dtype": "bfloat16",
                 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    cfg = shrink(entry("LlamaForCausalLM", config=hub_llama, representative="meta-llama/x"))
    assert cfg.tie_word_embeddings is True
    assert cfg.rope_parameters["rope_type"] == "llama3" and cfg.rope_parameters["factor"] == 8.0
    # Special tokens past the tiny vocab move inside it, still distinct.
    ids = [cfg.bos_token_id, *cfg.eos_token_id]
    assert all(0 <= i < cfg.vocab_size for i in ids) and len(set(ids)) == 3
    assert str(cfg.dtype).endswith("float32")


def test_head_dim_and_rotary_stay_consistent(isolated_settings):
    for name in ("CodeGenForCausalLM", "GPTJForCausalLM"):
        cfg = shrink(entry(name))
        assert cfg.rotary_dim <= cfg.n_embd // cfg.n_head
    for name in ("HunYuanDenseV1ForCausalLM", "MinistralForCausalLM"):  # head_dim None in the defaults
        cfg = shrink(entry(name))
        assert cfg.head_dim == 16


def test_composite_configs_use_their_text_config(isolated_settings):
    llama4 = shrink(entry("Llama4ForCausalLM", model_type="llama4"))  # composite Llama4Config in, text config out
    assert type(llama4).__name__ == "Llama4TextConfig" and llama4.hidden_size == 64
    gemma3 = shrink(entry("Gemma3ForConditionalGeneration"))
    assert gemma3.text_config.hidden_size == 64 and gemma3.vision_config.hidden_size == 64
    assert gemma3.image_token_id < gemma3.text_config.vocab_size


def test_shrinks_that_used_to_stay_huge_are_bounded(isolated_settings):
    for name in ("BltForCausalLM", "Gemma4ForCausalLM", "LongcatFlashForCausalLM", "Phi4MultimodalForCausalLM"):
        assert count_params(shrink(entry(name))) <= get_settings().max_tiny_params, name


def test_over_the_limit_is_refused_with_count_and_limit(isolated_settings, monkeypatch):
    monkeypatch.setenv("COMPAT_MAX_TINY_PARAMS", "1000")
    get_settings.cache_clear()
    with pytest.raises(ConfigTooLarge) as info:
        shrink(entry("LlamaForCausalLM"))
    assert "1,000" in str(info.value) and "parameters" in str(info.value)


def test_count_params_allocates_nothing():
    big = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                      vocab_size=32000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n = count_params(big)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert 6_500_000_000 < n < 7_000_000_000  # Llama-2-7B's 6.74B
    assert grown_mb < 500  # 27 GB of float32 weights were never allocated


def test_remote_code_and_non_causal_classes_are_refused():
    with pytest.raises(TinyConfigError, match="remote code"):
        shrink(ArchitectureEntry(name="FancyForCausalLM", model_type="fancy", rank=1, remote_code=True))
    with pytest.raises(TinyConfigError, match="not a causal-LM class"):
        shrink(ArchitectureEntry(name="BertModel", model_type="bert", rank=1))
    with pytest.raises(TinyConfigError, match="not a causal-LM class"):
        shrink(ArchitectureEntry(name="__import__", model_type="llama", rank=1))
