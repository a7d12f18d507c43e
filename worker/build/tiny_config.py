"""Shrink an architecture's config to a tiny one (hidden ~64, 2-4 layers, vocab ~1k) that keeps its features.

Generic name-based rules on the config dict (recursing into composite sub-configs), a layer cut that keeps hybrid
patterns (``worker.build.layer_pattern``), the per-architecture ``worker.build.overrides`` table, then a parameter bound.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
import transformers
from transformers import CONFIG_MAPPING, PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from compat.results import ArchitectureEntry
from compat.settings import get_settings
from worker.build.layer_pattern import cut_layers
from worker.build.overrides import BASE_OVERRIDES, OVERRIDES, apply_override, lookup
from worker.build.rope import shrink_rope

HIDDEN = 64
HEADS = 4
HEAD_DIM = 16
INTERMEDIATE = 128
EXPERT_INTERMEDIATE = 32
VOCAB = 1024
EXPERTS = 4
MAX_POSITIONS = 2048  # big enough for any test prompt; bounds learned position tables and causal-mask buffers
WINDOW = 16  # sliding windows shorter than a 32-token generation, so the windowed path really runs
SSM_STATE = 16
LORA_RANK = 32
SMALL_RANK = 8

HIDDEN_FIELDS = {
    "hidden_size", "d_model", "n_embd", "emb_dim", "embedding_dim", "lru_width", "attention_hidden_size",
    "word_embed_proj_dim", "hidden_size_global", "projector_input_dim", "projector_output_dim",
    "backbone_hidden_size", "router_hidden_size", "input_embedding_size", "output_embedding_size",
}
INTERMEDIATE_FIELDS = {
    "intermediate_size", "ffn_dim", "n_inner", "decoder_ffn_dim", "encoder_ffn_dim", "d_inner", "dff", "dim_ff",
    "ffn_hidden_size", "feed_forward_size", "intermediate_size_mlp", "dense_intermediate_size", "mlp_dim",
}
EXPERT_INTERMEDIATE_FIELDS = {
    "moe_intermediate_size", "expert_ffn_hidden_size", "shared_expert_intermediate_size",
    "shared_experts_intermediate_size", "moe_shared_expert_intermediate_size", "shared_intermediate_size",
}
HEAD_FIELDS = {
    "num_attention_heads", "n_head", "n_heads", "num_heads", "decoder_attention_heads", "encoder_attention_heads",
    "attention_heads", "swa_num_attention_heads", "num_decoder_attention_heads", "num_encoder_attention_heads",
}
KV_HEAD_FIELDS = {"num_key_value_heads", "num_kv_heads", "kv_n_heads", "multi_query_group_num",
                  "swa_num_key_value_heads", "num_query_groups"}
HEAD_DIM_FIELDS = {
    "head_dim", "d_head", "attention_head_dim", "kv_channels", "dim_head", "attention_head_size", "swa_head_dim",
    "linear_head_dim", "linear_key_head_dim", "linear_value_head_dim", "mamba_d_head", "mamba_head_dim",
    "mamba_headdim", "index_head_dim", "v_head_dim", "qk_nope_head_dim",
}
LINEAR_HEAD_FIELDS = {"linear_num_heads", "linear_num_key_heads", "linear_num_value_heads", "index_n_heads"}
CHANNEL_FIELDS = {"ext_pw_out_channel", "depthwise_separable_out_channel", "nemo_conv_channels"}
LORA_FIELDS = {"kv_lora_rank", "q_lora_rank", "o_lora_rank"}
SMALL_RANK_FIELDS = {"adapter_rank", "laurel_rank", "hc_lowrank", "gated_norm_rank", "time_step_rank",
                     "mamba_dt_rank", "d_rel"}
VOCAB_FIELDS = {"vocab_size", "decoder_vocab_size", "vocab_size_per_layer_input", "unpadded_vocab_size",
                "encoder_hash_byte_group_vocab", "shape_vocab_size", "pronunciation_vocab_size"}
POSITION_FIELDS = {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "context_length",
                   "max_target_positions", "model_max_length"}
EXPERT_COUNT_FIELDS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"}
TOPK_FIELDS = {"num_experts_per_tok", "moe_topk", "moe_top_k", "moe_k", "num_experts_per_token", "top_k"}
SHARED_EXPERT_FIELDS = {"n_shared_experts", "num_shared_experts", "moe_num_shared_experts"}
WINDOW_FIELDS = {"sliding_window", "attention_window_size", "local_attention", "sliding_window_size",
                 "attention_chunk_size", "local_attention_window_len", "window_size", "keep_window_size"}
SSM_STATE_FIELDS = {"state_size", "ssm_state_size", "mamba_d_state"}
MAMBA_HEAD_FIELDS = {"mamba_n_heads", "mamba_num_heads", "n_mamba_heads"}
CHUNK_FIELDS = {"chunk_size", "mamba_chunk_size"}
# Fields left None by some config classes' defaults that their models then need (hunyuan, ministral, dots1...).
FILL_NONE = {"head_dim": HEAD_DIM, "num_key_value_heads": HEADS, "num_experts_per_tok": 2, "n_routed_experts": EXPERTS,
             "n_shared_experts": 1}
ZERO_FIELDS = {"router_jitter_noise", "input_jitter_noise"}  # random routing noise breaks the reference check


class TinyConfigError(ValueError):
    """The architecture cannot be shrunk to a tiny config (the message says why)."""


class ConfigTooLarge(TinyConfigError):
    """The tiny config would exceed ``settings.max_tiny_params``."""


class NotBuildable(TinyConfigError):
    """The entry names nothing the harness may build: remote code, or not a causal-LM class (the input's fault)."""


class SourceConfigError(TinyConfigError):
    """The full-size config itself does not load in the installed Transformers (before any shrinking)."""


def model_class(entry: ArchitectureEntry) -> type:
    """The transformers class named by the entry; refuses remote code and anything not a causal LM."""
    if entry.remote_code:
        raise NotBuildable(f"{entry.name} needs remote code; it is never built")
    known = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    if entry.name not in known:
        raise NotBuildable(f"{entry.name} is not a causal-LM class of transformers {transformers.__version__}")
    cls = getattr(transformers, entry.name, None)
    if cls is None:
        raise NotBuildable(f"transformers {transformers.__version__} cannot import {entry.name}")
    return cls


def _base_config(entry: ArchitectureEntry, cls: type) -> dict[str, Any]:
    """The full-size config as a dict: the representative's config.json, else the config class defaults."""
    if entry.model_type not in CONFIG_MAPPING:
        raise NotBuildable(f"model_type {entry.model_type!r} is unknown to transformers {transformers.__version__}")
    config_cls = CONFIG_MAPPING[entry.model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if entry.config:
                # A copy: config classes fill defaults into nested dicts (rope_scaling) in place.
                raw = copy.deepcopy({k: v for k, v in entry.config.items()
                                     if k not in ("auto_map", "quantization_config")})
                config = config_cls.from_dict(raw)
            else:
                config = config_cls(**(lookup(BASE_OVERRIDES, entry.model_type, entry.name) or {}))
        except Exception as exc:  # noqa: BLE001 - any config class error is a reason, not a crash
            raise SourceConfigError(f"the model's own config does not load as {config_cls.__name__}: "
                                    f"{type(exc).__name__}: {exc}") from exc
    wanted = getattr(cls, "config_class", None)
    if wanted is not None and not isinstance(config, wanted):
        # Composite config (e.g. Llama4Config) for a text-only class: use the text sub-config.
        subs = [getattr(config, k, None) for k in getattr(config, "sub_configs", {})]
        sub = next((c for c in subs if isinstance(c, wanted)), None)
        if sub is None:
            raise TinyConfigError(f"{type(config).__name__} has no {wanted.__name__} for {entry.name}")
        config = sub
    return config.to_dict()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shrink_field(name: str, value: Any, d: dict[str, Any]) -> Any:
    """The tiny value of one field (``value`` is the original), or ``value`` when no rule applies."""
    if isinstance(value, list) and value and all(_is_int(v) for v in value):
        return shrink_size_list(name, value, d)  # per-layer / per-head / per-expert sizes (or not sizes at all)
    if isinstance(value, float) and ("dropout" in name or "pdrop" in name or name.endswith("layerdrop")
                                     or name in ZERO_FIELDS):
        return 0.0
    if value is None and name in FILL_NONE:
        return FILL_NONE[name]
    if not _is_int(value) or value <= 0:
        return value
    target = _target(name, value, d)
    return value if target is None else min(value, target)


def shrink_size_list(name: str, values: list[int], d: dict[str, Any]) -> list[int]:
    """A list of sizes named like a size field (``intermediate_size: [..]`` per layer, Laguna's
    ``num_attention_heads_per_layer``, ERNIE's ``moe_num_experts: [64, 64]``), shrunk in proportion: the smallest
    positive entry gets the field's tiny size and the others keep their ratio to it, so layers that differ still
    differ. Lists of other things (token ids, layer indices, sections) have no size rule and stay as they are."""
    positive = [v for v in values if v > 0]
    rule_name = name if _target(name, 2, d) is not None else _size_rule_name(name)
    if not positive or rule_name is None:
        return values
    low = min(positive)
    tiny_low = _shrink_field(rule_name, low, d)
    if not _is_int(tiny_low) or tiny_low == low:
        return values
    return [v if v <= 0 else min(v, max(1, round(v * tiny_low / low))) for v in values]


def _size_rule_name(name: str) -> str | None:
    """The scalar size field a list's name stands for (``num_attention_heads_per_layer`` -> heads), if any."""
    for suffix in ("_per_layer", "_per_expert", "_per_head", "_list", "s_list"):
        if name.endswith(suffix) and _target(name[: -len(suffix)], 2, {}) is not None:
            return name[: -len(suffix)]
    return None


def _target(name: str, value: int, d: dict[str, Any]) -> int | None:
    """The tiny size for an int field (``min``-ed with the original, so nothing grows), None when no rule."""
    if name in HIDDEN_FIELDS:
        return HIDDEN
    if name in INTERMEDIATE_FIELDS:
        return INTERMEDIATE
    if name in EXPERT_INTERMEDIATE_FIELDS:
        return EXPERT_INTERMEDIATE
    if name in HEAD_FIELDS:
        return HEADS
    if name in KV_HEAD_FIELDS:
        heads = next((d[h] for h in HEAD_FIELDS if _is_int(d.get(h))), None)
        if value == 1:
            return 1  # multi-query attention stays multi-query
        return HEADS if value == heads else 2  # MHA stays MHA, GQA stays grouped
    if name in HEAD_DIM_FIELDS:
        return HEAD_DIM
    if name in ("qk_rope_head_dim", "rotary_dim"):
        return SMALL_RANK
    if name in LINEAR_HEAD_FIELDS:
        return 2
    if name in LORA_FIELDS:
        return LORA_RANK
    if name in CHANNEL_FIELDS:
        return HIDDEN
    if name in SMALL_RANK_FIELDS:
        return SMALL_RANK
    if name in VOCAB_FIELDS:
        return VOCAB
    if name in POSITION_FIELDS:
        return MAX_POSITIONS
    if name in EXPERT_COUNT_FIELDS:
        return EXPERTS
    if name in TOPK_FIELDS:
        return 2
    if name in SHARED_EXPERT_FIELDS:
        return 1
    if name in ("n_group", "num_expert_group"):
        return 2
    if name == "topk_group":
        return 1
    if name in WINDOW_FIELDS:
        return WINDOW
    if name in SSM_STATE_FIELDS:
        return SSM_STATE
    if name in CHUNK_FIELDS:
        return 16
    if name == "index_topk":
        return 8
    return None


TOKEN_FIELD_SUFFIXES = ("_token_id", "_token_ids", "_token_index", "_token")


def _token_ids(tree: dict[str, Any]) -> set[int]:
    """Every special-token id in a config tree (sub-configs included)."""
    found: set[int] = set()
    for k, v in tree.items():
        if isinstance(v, dict):
            found |= _token_ids(v)
        elif isinstance(k, str) and k.endswith(TOKEN_FIELD_SUFFIXES):
            found |= {x for x in (v if isinstance(v, list) else [v]) if _is_int(x)}
    return found


def token_ranks(tree: dict[str, Any]) -> dict[int, int]:
    """Rank of each large special-token id in the whole tree (largest first), so a token moved below the tiny
    vocab gets the same new id in the parent config and in every sub-config."""
    return {v: r for r, v in enumerate(sorted((v for v in _token_ids(tree) if v >= VOCAB), reverse=True))}


def _remap_token_ids(d: dict[str, Any], vocab: int, orig_vocab: Any, ranks: dict[int, int]) -> None:
    """Special-token ids past the tiny vocab move to its top (vocab - 1 - rank), distinct ids staying distinct.

    An id equal to the original vocab size stays "one past the end" (MusicGen's pad lives in an extra row).
    """
    def new(x: Any) -> Any:
        if not _is_int(x) or x < vocab:
            return x
        if x == orig_vocab:
            return vocab
        return max(0, vocab - 1 - ranks.get(x, 0))

    for k, v in d.items():
        if isinstance(k, str) and k.endswith(TOKEN_FIELD_SUFFIXES):
            d[k] = [new(x) for x in v] if isinstance(v, list) else new(v)


def _fix_relations(d: dict[str, Any], orig: dict[str, Any]) -> None:
    """Re-establish relations between fields that the per-field rules break."""
    if _is_int(orig.get("head_dim")) and orig.get("head_dim") == orig.get("qk_rope_head_dim"):
        d["head_dim"] = d["qk_rope_head_dim"]  # MLA models rope over head_dim = qk_rope_head_dim
    if _is_int(d.get("qk_nope_head_dim")) and _is_int(d.get("qk_rope_head_dim")) and "qk_head_dim" in d:
        d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
    nope, rope = orig.get("qk_nope_head_dim"), orig.get("qk_rope_head_dim")
    if _is_int(nope) and _is_int(rope):
        for name in HEAD_DIM_FIELDS - {"qk_nope_head_dim", "v_head_dim"}:
            if orig.get(name) == nope + rope and name != "head_dim":
                d[name] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]  # e.g. SWA head_dim = nope + rope
    if _is_int(d.get("rotary_dim")) and _is_int(d.get("head_dim")):
        d["rotary_dim"] = min(d["rotary_dim"], d["head_dim"])
    hidden = d.get("hidden_size")
    if _is_int(orig.get("attention_hidden_size")) and _is_int(orig.get("hidden_size")) and _is_int(hidden):
        # Zamba's attention runs on [hidden, hidden] concatenated: keep that ratio, and head dims derived from it.
        ratio = max(1, orig["attention_hidden_size"] // orig["hidden_size"])
        d["attention_hidden_size"] = ratio * hidden
        heads = d.get("num_attention_heads")
        if _is_int(orig.get("attention_head_dim")) and _is_int(heads) and _is_int(orig.get("num_attention_heads")):
            if orig["attention_head_dim"] * orig["num_attention_heads"] == orig["attention_hidden_size"]:
                d["attention_head_dim"] = d["attention_hidden_size"] // heads
    expand = d.get("mamba_expand", d.get("expand"))
    if _is_int(d.get("mamba_d_ssm")) and _is_int(expand) and _is_int(hidden):
        d["mamba_d_ssm"] = expand * hidden  # Falcon-H1: the SSM width is expand * hidden
    if all(_is_int(d.get(k)) for k in ("state_size", "num_heads", "head_dim")) and _is_int(expand) and \
            _is_int(hidden) and "n_groups" in d:
        d["num_heads"] = max(1, expand * hidden // d["head_dim"])  # Mamba-2: heads * head_dim = expand * hidden
    for name in MAMBA_HEAD_FIELDS:
        if _is_int(d.get(name)):
            head = next((d[h] for h in ("mamba_d_head", "mamba_head_dim", "mamba_headdim") if _is_int(d.get(h))),
                        None)
            if head and _is_int(expand):
                d[name] = max(1, expand * HIDDEN // head)
            else:
                d[name] = min(d[name], 4)
    for name in ("n_groups", "mamba_n_groups", "mamba_ngroups"):
        if _is_int(d.get(name)):
            d[name] = 1
    _heads_divisible(d)
    if _is_int(d.get("num_experts_per_tok")) and _is_int(d.get("topk_group")) and _is_int(d.get("n_group")):
        per_group = max(1, EXPERTS // d["n_group"])
        d["num_experts_per_tok"] = min(d["num_experts_per_tok"], d["topk_group"] * per_group)



def _heads_divisible(d: dict[str, Any]) -> None:
    """Grouped-query attention needs heads % kv_heads == 0 per layer: round per-layer head counts up to it."""
    kv = d.get("num_key_value_heads")
    for name in ("num_attention_heads_per_layer",):
        heads = d.get(name)
        if isinstance(heads, list) and all(_is_int(h) for h in heads):
            kvs = kv if isinstance(kv, list) and len(kv) == len(heads) else [kv] * len(heads)
            d[name] = [-(-h // k) * k if _is_int(k) and k > 0 and h > 0 else h for h, k in zip(heads, kvs, strict=True)]


def shrink_dict(d: dict[str, Any], keep: list[int] | None = None, parent_vocab: tuple[int, int] | None = None,
                ranks: dict[int, int] | None = None) -> dict[str, Any]:
    """Apply the generic rules to one config dict and, recursively, to its sub-config dicts.

    ``keep`` names the original layers to keep (an override's ``__layers__``); default: one of each kind.
    ``parent_vocab`` = (original, tiny) vocab of the enclosing config, for sub-configs that carry token ids only.
    """
    orig = d
    ranks = token_ranks(d) if ranks is None else ranks
    out: dict[str, Any] = {}
    vocab = d.get("vocab_size")
    if not _is_int(vocab) and parent_vocab is None:
        # A composite config's token ids (image_token_id, ...) index its text config's vocabulary.
        text = d.get("text_config") or next((v for v in d.values() if isinstance(v, dict) and
                                             _is_int(v.get("vocab_size"))), {})
        vocab = text.get("vocab_size") if isinstance(text, dict) else None
    own_vocab = (vocab, _shrink_field("vocab_size", vocab, d)) if _is_int(vocab) else parent_vocab
    for name, value in d.items():
        if name == "per_layer_config" and isinstance(value, dict):
            # {"05": {"head_dim": 512}}: per-layer field overrides get the same rules; cut_layers renumbers them.
            out[name] = {k: {f: _shrink_field(f, v, {**d, **sub}) for f, v in sub.items()}
                         if isinstance(sub, dict) else sub for k, sub in value.items()}
        elif isinstance(value, dict) and (name.endswith("config") or "model_type" in value):
            out[name] = shrink_dict(value, parent_vocab=own_vocab, ranks=ranks)
        else:
            out[name] = _shrink_field(name, value, d)
    out = cut_layers(out, keep)
    _fix_relations(out, orig)
    shrink_rope(out, orig)
    if own_vocab is not None:
        _remap_token_ids(out, own_vocab[1], own_vocab[0], ranks)
    if "dtype" in out:
        out["dtype"] = "float32"
    return out


def shrink(entry: ArchitectureEntry) -> PretrainedConfig:
    """A tiny config of ``entry``'s architecture; nothing is allocated. Raises TinyConfigError/ConfigTooLarge."""
    cls = model_class(entry)
    base = _base_config(entry, cls)
    override = dict(lookup(OVERRIDES, entry.model_type, entry.name) or {})
    tiny = shrink_dict(copy.deepcopy(base), override.pop("__layers__", None))
    if override:
        tiny = apply_override(tiny, override)
    config_cls = cls.config_class if getattr(cls, "config_class", None) else CONFIG_MAPPING[entry.model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            config = config_cls.from_dict(tiny)
        except Exception as exc:  # noqa: BLE001
            raise TinyConfigError(f"tiny {config_cls.__name__} invalid: {type(exc).__name__}: {exc}") from exc
    config.architectures = [entry.name]
    n = count_params(config, cls)
    limit = get_settings().max_tiny_params
    if n > limit:
        raise ConfigTooLarge(f"tiny {entry.name} would have {n:,} parameters, over the limit of {limit:,} "
                             "(COMPAT_MAX_TINY_PARAMS)")
    return config


def count_params(config: PretrainedConfig, cls: type | None = None) -> int:
    """Parameter count of the model ``config`` describes, instantiated on the meta device (allocates nothing)."""
    if cls is None:
        name = (config.architectures or [None])[0]
        cls = getattr(transformers, name, None) if name else None
        if cls is None:
            cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.device("meta"):
                model = cls(copy.deepcopy(config))
        except Exception as exc:  # noqa: BLE001
            raise TinyConfigError(f"cannot instantiate {cls.__name__}: {type(exc).__name__}: {exc}") from exc
    return sum(p.numel() for p in model.parameters())

