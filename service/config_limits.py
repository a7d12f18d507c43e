"""The pure cap check of an uploaded config: every count that scales the cost of building it (layers, experts, heads,
vocabulary, hidden and FFN width, sequence length), under any of its names and in every sub-config.

Runs before anything is imported or built, in well under 50 ms on any input the upload cap admits (bench/README.md):
it walks the dicts of the config once and only measures lists, never iterates a long one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# Caps, each well above every published model (largest known: ~126-160 layers, 512 routed experts, 128 heads,
# 262k vocabulary, 16k hidden, 10M context) and low enough that a meta-device build stays around a second: building
# costs ~5 ms per decoder layer here (bench/README.md, "validation"), so the layer cap bounds the build.
LIMITS: dict[str, int] = {
    "layers": 256,
    "experts": 4096,
    "heads": 4096,
    "vocab": 4_194_304,
    "hidden": 131_072,
    "width": 1_048_576,
    "sequence": 16_777_216,
}
# Routed experts are built per layer: a product cap keeps 256 layers x 4096 experts out (largest real: 48 x 512).
MAX_LAYER_EXPERTS = 65_536
MAX_DEPTH = 8  # real configs nest 5 deep at most (quantization_config.config_groups.group_0.weights.*)
MAX_LIST = 4096  # longest real list: per-layer types/sizes of <= 256 layers, quantization module lists

_HIDDEN = {"hidden_size", "d_model", "n_embd", "embed_dim", "embedding_dim", "dim", "model_dim", "emb_dim",
           "word_embed_proj_dim", "attention_hidden_size", "lru_width", "hidden_dim"}
_WIDTH_WORDS = ("intermediate", "ffn", "d_ff", "n_inner", "d_inner", "mlp_dim", "d_kv", "head_dim", "_dim",
                "kv_lora_rank", "q_lora_rank", "state_size", "d_state", "d_ssm", "d_conv", "conv_kernel")
_SEQUENCE = {"n_positions", "n_ctx", "max_seq_len", "seq_length", "context_length", "max_sequence_length",
             "model_max_length", "max_target_positions", "max_source_positions", "sliding_window",
             "attention_window_size", "attention_chunk_size", "window_size", "local_attention"}
_NOT_EXPERT_COUNT = ("size", "dim", "intermediate", "hidden", "factor", "coef", "ratio", "capacity", "bias",
                     "scaling", "jitter", "noise", "loss", "act", "norm", "type", "start", "end", "freq", "interval",
                     "step", "period", "offset", "layers", "topk_method", "first_k", "dense")
_NOT_LAYER_COUNT = ("dropout", "norm", "scale", "eps", "type", "period", "interval", "offset", "start", "end",
                    "first_k", "replace", "freq", "step", "index", "window")


def category(name: str) -> str | None:
    """Which cost a field counts, from its name (``n_layers`` and ``num_blocks`` are layers; ``moe_num_experts``
    and ``num_local_experts`` are experts; ``max_seq_len`` is sequence length), or None."""
    n = name.lower()
    if n.endswith(("heads", "n_head", "head_kv")) or "heads_per" in n or n in ("num_query_groups",
                                                                              "multi_query_group_num"):
        return "heads"
    if n in ("n_layer", "n_layers", "num_layers", "num_blocks", "depth", "layers") or (
            (n.endswith("_layers") or n.endswith("_layer")) and not any(w in n for w in _NOT_LAYER_COUNT)):
        return "layers"
    if "expert" in n and not any(w in n for w in _NOT_EXPERT_COUNT):
        return "experts"
    if "vocab" in n and "size" in n:
        return "vocab"
    if n in _HIDDEN:
        return "hidden"
    if "position" in n or n in _SEQUENCE:
        return "sequence"
    if "scale" not in n and any(w in n for w in _WIDTH_WORDS):
        return "width"
    return None


class CapExceeded(ValueError):
    """A count over its cap, or a config too deep or too long to measure; ``field`` is its dotted path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _dicts(cfg: dict[str, Any], path: str = "", depth: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every dict of the config with its dotted path (the config itself first); lists are not entered."""
    if depth > MAX_DEPTH:
        raise CapExceeded(path or "config", f"config nests deeper than {MAX_DEPTH} levels")
    yield path, cfg
    for key, value in cfg.items():
        if isinstance(value, dict):
            yield from _dicts(value, f"{path}.{key}" if path else str(key), depth + 1)


def _check_count(field: str, cat: str, value: Any) -> int | None:
    """The count's value when it is a positive integer (raising when it is over its cap), else None: a wrong type
    (``2.5`` layers, ``NaN``) is Transformers' to refuse, field by field, in the next stage. Negative values have
    meanings of their own only for a layer index or a window (``vision_feature_layer: -1``)."""
    if not _is_int(value):
        return None
    if value < 0:
        name = field.rsplit(".", 1)[-1].split("[", 1)[0]
        if (name.endswith("_layer") and not name.startswith(("n_", "num_"))) or "window" in name:
            return None
        raise CapExceeded(field, f"{field}={value} must not be negative")
    if value == 0:
        return None
    if value > LIMITS[cat]:
        raise CapExceeded(field, f"{field}={value} is above the limit {LIMITS[cat]} ({cat})")
    return value


def check_caps(cfg: dict[str, Any]) -> None:
    """Refuse (``CapExceeded``) the first count over its cap, anywhere in the config: scalar counts, per-layer
    lists of counts, per-layer lists and pattern strings longer than the layer cap, and layers x experts."""
    layers = experts = 0
    layer_field = expert_field = ""
    for path, d in _dicts(cfg):
        for key, value in d.items():
            if not isinstance(key, str) or isinstance(value, dict):
                continue
            field = f"{path}.{key}" if path else key
            cat = category(key)
            if isinstance(value, list):
                if len(value) > MAX_LIST:
                    raise CapExceeded(field, f"{field} has {len(value)} entries; the limit is {MAX_LIST}")
                if ("layer" in key or "block" in key) and len(value) > LIMITS["layers"]:
                    raise CapExceeded(field, f"{field} describes {len(value)} layers; the limit is "
                                             f"{LIMITS['layers']}")
                if cat is not None and all(_is_int(v) for v in value):  # per-layer sizes, e.g. intermediate_size
                    for i, v in enumerate(value):
                        _check_count(f"{field}[{i}]", cat, v)
                continue
            if isinstance(value, str) and "pattern" in key and len(value) > LIMITS["layers"]:
                # Nemotron-H, Zamba: one character per layer
                raise CapExceeded(field, f"{field} describes {len(value)} layers; the limit is {LIMITS['layers']}")
            if cat is None or isinstance(value, str):
                continue
            count = _check_count(field, cat, value)
            if count is None:
                continue
            if cat == "layers" and count > layers:
                layers, layer_field = count, field
            elif cat == "experts" and count > experts:
                experts, expert_field = count, field
    if layers * experts > MAX_LAYER_EXPERTS:
        raise CapExceeded(expert_field, f"{layer_field}={layers} x {expert_field}={experts} experts is above the "
                                        f"limit of {MAX_LAYER_EXPERTS} expert blocks")
