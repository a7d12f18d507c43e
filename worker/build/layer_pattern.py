"""Cutting a config's layer stack to a few layers while keeping every kind of layer it has.

Hybrid models describe their layers with per-layer lists, index lists, pattern strings and periods; a naive
"num_hidden_layers = 2" removes every attention layer of a Mamba/attention hybrid. This keeps one of each kind.
"""

from __future__ import annotations

from typing import Any

# Fields holding "the number of layers" of a stack (the first one present is the stack we cut).
LAYER_COUNT_FIELDS = (
    "num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers", "num_decoder_layers", "num_blocks",
)
# Periodic layer rules: "every Nth layer is X". Shrunk to period 2 so a 4-layer stack still holds both kinds.
PERIOD_FIELDS = (
    "attn_layer_period", "expert_layer_period", "global_attn_every_n_layers", "interleave_moe_layer_step",
    "no_rope_layer_interval", "sliding_window_pattern", "_sliding_window_pattern", "decoder_sparse_step",
    "moe_layer_interval", "moe_layer_freq", "layer_group_size", "n_layers_per_attn_res_block",
    "prefix_dense_sliding_window_pattern", "full_attn_period", "attention_period",
)
OFFSET_FIELDS = ("attn_layer_offset", "expert_layer_offset")
# "The first k layers are dense / special": keep one such layer, so the rest of the stack shows the other kind.
PREFIX_FIELDS = ("first_k_dense_replace", "num_dense_layers", "moe_layer_start_index", "first_dense_layers")
MAX_KEPT_LAYERS = 6
DEFAULT_LAYERS = 2
HYBRID_LAYERS = 4


# Per-layer lists some config classes keep instead of a depth field (transformers 5.23's NemotronHConfig turns
# hybrid_override_pattern into layers_block_type and derives num_hidden_layers from its length).
LAYER_LIST_FIELDS = ("layers_block_type", "layer_types", "block_types", "layers_block_types")


def layer_count(d: dict[str, Any]) -> tuple[str, int] | None:
    """The field naming the depth of this config's stack, and its value (a per-layer list's length when the
    config has no depth field)."""
    for name in LAYER_COUNT_FIELDS:
        value = d.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return name, value
    for name in LAYER_LIST_FIELDS:
        value = d.get(name)
        if isinstance(value, list) and len(value) > 1:
            return name, len(value)
    return None


def _is_index_list(name: str, value: Any, n_layers: int) -> bool:
    """A list of layer indices (``mlp_only_layers=[0, 1]``, ``full_attn_idxs=[2, 5]``), not a per-layer list."""
    if not isinstance(value, list) or not value or not all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in value):
        return False
    lowered = name.lower()
    looks_like_indices = any(t in lowered for t in ("layers", "idxs", "indices", "indexes", "layer_ids"))
    if not looks_like_indices or max(value) >= n_layers or min(value) < 0:
        return False
    # A per-layer 0/1 flag list of the right length is a per-layer list, not indices.
    return not (len(value) == n_layers and set(value) <= {0, 1})


def _is_per_layer(name: str, value: Any, n_layers: int) -> bool:
    """A list with one item per layer, or a pattern string with one character per layer ("M*M-")."""
    if isinstance(value, str):
        return "pattern" in name and len(value) == n_layers and n_layers > 1
    return isinstance(value, list) and len(value) == n_layers and n_layers > 1


def _layer_keyed(name: str, value: Any, n_layers: int) -> dict[int, str] | None:
    """{layer index: original key} of a dict keyed by layer indices ("05": {...}), else None."""
    if "layer" not in name or not isinstance(value, dict) or not value:
        return None  # id2label is keyed 0, 1 too: only layer-named dicts count
    try:
        keys = {int(k): k for k in value}
    except (TypeError, ValueError):
        return None
    return keys if all(0 <= i < n_layers for i in keys) else None


def _categorical(value: Any) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(v, str | bool | type(None)) or v in (0, 1) for v in value)


def choose_layers(d: dict[str, Any], n_layers: int) -> list[int]:
    """Indices of the original layers to keep: the first layer of each distinct kind, at least two."""
    signals: list[list[Any]] = [[] for _ in range(n_layers)]
    for name, value in d.items():
        if name in LAYER_COUNT_FIELDS:
            continue
        if _is_index_list(name, value, n_layers):
            members = set(value)
            for i in range(n_layers):
                signals[i].append(i in members)
        elif _is_per_layer(name, value, n_layers) and _categorical(value):
            for i in range(n_layers):
                signals[i].append(_hashable(value[i]))
        elif (keyed := _layer_keyed(name, value, n_layers)) is not None:
            for i in range(n_layers):
                signals[i].append(i in keyed)
    kept: list[int] = []
    seen: set[tuple[Any, ...]] = set()
    for i, signal in enumerate(signals):
        key = tuple(signal)
        if key not in seen:
            seen.add(key)
            kept.append(i)
    kept = kept[:MAX_KEPT_LAYERS]
    periodic = any(isinstance(d.get(f), int) and d.get(f, 0) > 1 for f in PERIOD_FIELDS + PREFIX_FIELDS)
    want = max(len(kept), HYBRID_LAYERS if periodic else DEFAULT_LAYERS)
    for i in range(n_layers):
        if len(kept) >= min(want, n_layers):
            break
        if i not in kept:
            kept.append(i)
    return sorted(kept)


def _hashable(v: Any) -> Any:
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def cut_layers(d: dict[str, Any], keep: list[int] | None = None) -> dict[str, Any]:
    """Return ``d`` with its layer stack cut to ``keep`` (default: the chosen layers), per-layer fields consistent."""
    found = layer_count(d)
    if found is None:
        return d
    count_field, n_layers = found
    if keep is not None:
        kept = sorted(i for i in keep if i < n_layers)
    else:
        kept = choose_layers(d, n_layers)
    new_n = len(kept)
    out = dict(d)
    for name, value in d.items():
        if ("layer" in name or name in LAYER_COUNT_FIELDS) and isinstance(value, int) and not isinstance(value, bool) and value == n_layers:
            out[name] = new_n  # "all layers" (num_kv_shared_layers = num_hidden_layers) stays all layers
        elif _is_index_list(name, value, n_layers):
            out[name] = [kept.index(i) for i in value if i in kept]
        elif _is_per_layer(name, value, n_layers):
            picked = [value[i] for i in kept]
            out[name] = "".join(picked) if isinstance(value, str) else picked
        elif (keyed := _layer_keyed(name, value, n_layers)) is not None:
            width = max(len(str(k)) for k in keyed.values())
            out[name] = {(f"{kept.index(i):0{width}d}" if isinstance(k, str) else kept.index(i)): value[k]
                         for i, k in sorted(keyed.items()) if i in kept}
    for name in PERIOD_FIELDS:
        if isinstance(out.get(name), int) and not isinstance(out[name], bool) and out[name] > 2:
            out[name] = 2
    for name in OFFSET_FIELDS:
        if isinstance(out.get(name), int) and out[name] > 1:
            out[name] = 1
    for name in PREFIX_FIELDS:
        if isinstance(out.get(name), int) and not isinstance(out[name], bool) and out[name] > 1:
            out[name] = 1
    if isinstance(out.get("moe_layer_end_index"), int):
        out["moe_layer_end_index"] = new_n - 1
    if isinstance(out.get("max_window_layers"), int) and out["max_window_layers"] > new_n:
        out["max_window_layers"] = new_n // 2
    if count_field in LAYER_COUNT_FIELDS:  # a per-layer list standing for the depth was sliced above
        out[count_field] = new_n
    return out
