"""Shrink an architecture's config to a tiny one (hidden ~64, 2-4 layers, vocab ~1k) that keeps its features.

Generic name-based rules on the config dict (recursing into composite sub-configs; sizes and field names in
``worker.build.sizes``), a layer cut that keeps hybrid patterns (``worker.build.layer_pattern``), the relations the
rules break re-tied (``worker.build.relations``), the per-architecture ``worker.build.overrides`` table, then a
parameter bound.
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
from worker.build.relations import fix_relations
from worker.build.rope import shrink_rope
from worker.build.sizes import (
    CHANNEL_FIELDS,
    CHUNK_FIELDS,
    EXPERT_COUNT_FIELDS,
    EXPERT_INTERMEDIATE,
    EXPERT_INTERMEDIATE_FIELDS,
    EXPERTS,
    FILL_NONE,
    HEAD_DIM,
    HEAD_DIM_FIELDS,
    HEAD_FIELDS,
    HEADS,
    HIDDEN,
    HIDDEN_FIELDS,
    INTERMEDIATE,
    INTERMEDIATE_FIELDS,
    KV_HEAD_FIELDS,
    LINEAR_HEAD_FIELDS,
    LORA_FIELDS,
    LORA_RANK,
    MAX_POSITIONS,
    POSITION_FIELDS,
    SHARED_EXPERT_FIELDS,
    SMALL_RANK,
    SMALL_RANK_FIELDS,
    SSM_STATE,
    SSM_STATE_FIELDS,
    TOPK_FIELDS,
    VOCAB,
    VOCAB_FIELDS,
    WINDOW,
    WINDOW_FIELDS,
    ZERO_FIELDS,
)


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
    fix_relations(out, orig)
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

