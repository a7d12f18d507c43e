"""Per-architecture overrides applied after the generic shrink, where the generic rules are not enough.

Keyed by model_type (or class name); values are config fields to set, dotted for sub-configs ("text_config.x");
"__layers__" names which of the original layers to keep when the generic "one of each kind" choice is not enough.
"""

from __future__ import annotations

import copy
from typing import Any

# Each entry says why the generic rule fails for it.
OVERRIDES: dict[str, dict[str, Any]] = {
    # The config class defaults are pure Mamba; real Bamba checkpoints interleave attention layers.
    "bamba": {"attn_layer_indices": [1]},
    # Defaults list only linear-attention (Mamba) layers; Granite-4.0-H checkpoints mix in attention.
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    # block_types repeats (recurrent, recurrent, attention): three layers hold one of each.
    "recurrent_gemma": {"num_hidden_layers": 3},
    # The model reads attn_config.rope_theta, which the defaults lack but every DBRX checkpoint sets.
    # The model reads attn_config.rope_theta and clamps with clip_qkv: every DBRX checkpoint sets both.
    "dbrx": {"attn_config.rope_theta": 500000.0, "attn_config.clip_qkv": 8.0},
    # The model indexes rope_parameters by layer type; the defaults carry no per-type entry.
    "cohere_compass_text": {
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    },
    # Defaults leave layer_types None and the model indexes it; LFM2 checkpoints mix conv and attention.
    "lfm2_moe": {"layer_types": ["conv", "full_attention", "conv", "full_attention"]},
    # ReformerModelWithLMHead refuses a non-decoder config; LSH + local attention need chunked lengths.
    # The axial position factors must sum to hidden_size.
    # Axial position embeddings force training inputs to exactly prod(axial_pos_shape) tokens; LSH stays.
    "reformer": {"is_decoder": True, "axial_pos_embds": False},
    # MusicGen reads input_ids as (batch * num_codebooks, seq); one codebook takes plain (batch, seq) ids.
    "musicgen": {"num_codebooks": 1, "decoder_start_token_id": 1024},
    "musicgen_melody": {"num_codebooks": 1, "decoder_start_token_id": 1024},
    # Sliding layers' per-layer MLA must satisfy head_dim = qk_nope + qk_rope (16 + 8).
    "dots3_note_text": {"head_dim": 24},
    # The last num_kv_shared_layers reuse the KV of an earlier layer of their type: keep a sliding and a full
    # layer on each side of that boundary (pattern s,s,s,s,f; layers 15-29 shared).
    # QSA indexer fields default to None and the model divides by them; budget 8 < a 32-token generation,
    # so the sparse selection really runs.
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                       "indexer_compress_ratio": 4},
    # num_blocks is xLSTM's second name for the depth; its cache rounds qk_dim = hidden * 0.5 up to a multiple of
    # 64 while the projections do not, so hidden must be 128 for the two to agree.
    "xlstm": {"num_blocks": 2, "hidden_size": 128, "embedding_dim": 128},
    # Hybrid layers share one transformer block whose weights are tied across them: keep two hybrid layers (2, 7).
    "zamba": {"__layers__": [0, 2, 3, 7]},
    # X-MOD routes through per-language adapters and refuses input without a language.
    "xmod": {"default_language": "en_XX"},
    # HRM's cache has num_layers_per_stack * H_cycles * (L_cycles + 1) slots, which must equal num_hidden_layers.
    "hrm_text": {"num_layers_per_stack": 2, "H_cycles": 2, "L_cycles": 1, "L_bp_cycles": [1],
                 "num_hidden_layers": 8},
    "gemma3n_text": {"__layers__": [0, 4, 15, 19], "num_kv_shared_layers": 2},
}

# Fields set on the full-size config *before* shrinking, where the config class defaults do not validate.
BASE_OVERRIDES: dict[str, dict[str, Any]] = {
    # Gemma4AssistantConfig() rejects its own text_config defaults (the assistant shares every layer's KV).
    "gemma4_assistant": {"text_config": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0,
                                         "enable_moe_block": False, "use_double_wide_mlp": False,
                                         "num_hidden_layers": 4, "num_kv_shared_layers": 4}},
}


def lookup(table: dict[str, dict[str, Any]], model_type: str, class_name: str) -> dict[str, Any] | None:
    """The table's entry for an architecture, by model_type first, then by class name."""
    return table.get(model_type) or table.get(class_name)


def apply_override(d: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``d`` with the override's fields set (dotted keys reach into sub-config dicts)."""
    out = copy.deepcopy(d)
    for key, value in override.items():
        target = out
        *path, leaf = key.split(".")
        for part in path:
            target = target.setdefault(part, {})
        target[leaf] = value
    return out
