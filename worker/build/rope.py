"""Shrinking a config's RoPE parameters with its heads and context, so every variant Transformers knows stays valid.

The sizes inside ``rope_parameters`` (``rope_scaling`` in older files) follow the rotary dimension and the context
length: longrope's ``short_factor``/``long_factor`` hold one factor per rotary frequency (``rotary_dim / 2``), mrope's
``mrope_section`` splits those frequencies and must sum to ``rotary_dim / 2``, and yarn, llama3 and longrope read the
pre-training length ``original_max_position_embeddings`` against ``max_position_embeddings``.
Source: transformers 5.23.0 ``modeling_rope_utils.py`` (``_compute_longrope_parameters``,
``_validate_longrope_rope_parameters``, ``RopeParameters.mrope_section``, ``standardize_rope_params``).
"""

from __future__ import annotations

from typing import Any

ROPE_KEYS = ("rope_parameters", "rope_scaling")
POSITIONS = "max_position_embeddings"
ORIGINAL_POSITIONS = "original_max_position_embeddings"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def head_dim(d: dict[str, Any]) -> int | None:
    """The head dim Transformers' RoPE code uses: ``head_dim``, else hidden / heads."""
    if _is_int(d.get("head_dim")) and d["head_dim"] > 0:
        return d["head_dim"]
    hidden, heads = d.get("hidden_size"), d.get("num_attention_heads")
    if _is_int(hidden) and _is_int(heads) and heads > 0:
        return hidden // heads
    return None


def resample(values: list[Any], n: int) -> list[Any]:
    """``n`` values picked evenly from ``values`` (first and last kept): the factors' low-to-high frequency shape."""
    if n <= 0:
        return []
    if len(values) == n or not values:
        return list(values)
    if n == 1:
        return [values[0]]
    last = len(values) - 1
    return [values[round(i * last / (n - 1))] for i in range(n)]


def split_sections(sections: list[int], total: int) -> list[int]:
    """Integer sections proportional to ``sections`` that sum to ``total`` (largest remainder first)."""
    whole = sum(sections)
    if whole <= 0 or total <= 0:
        return [0] * len(sections)
    exact = [s * total / whole for s in sections]
    out = [int(x) for x in exact]
    by_remainder = sorted(range(len(sections)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in by_remainder[: total - sum(out)]:
        out[i] += 1
    return out


def _scaled_positions(value: Any, ratio: float) -> Any:
    if not _is_int(value) or value <= 0:
        return value
    return max(1, round(value * ratio))


def _shrink_one(params: dict[str, Any], d: dict[str, Any], ratio: float) -> dict[str, Any]:
    out = dict(params)
    hd = head_dim(d)
    partial = out.get("partial_rotary_factor", d.get("partial_rotary_factor", 1.0))
    if not isinstance(partial, int | float) or isinstance(partial, bool):
        partial = 1.0
    half = int(hd * partial) // 2 if hd else None
    if half is not None:
        for name in ("short_factor", "long_factor"):
            if isinstance(out.get(name), list):
                out[name] = resample(out[name], half)
        if isinstance(out.get("mrope_section"), list) and all(_is_int(s) for s in out["mrope_section"]):
            out["mrope_section"] = split_sections(out["mrope_section"], half)
    if ORIGINAL_POSITIONS in out:
        out[ORIGINAL_POSITIONS] = _scaled_positions(out[ORIGINAL_POSITIONS], ratio)
    return out


def _original_positions(d: dict[str, Any]) -> int | None:
    """The pre-training length, top level (Phi-3) or inside the RoPE parameters (flat or per layer type)."""
    candidates = [d.get(ORIGINAL_POSITIONS)]
    for key in ROPE_KEYS:
        params = d.get(key)
        if isinstance(params, dict):
            candidates.append(params.get(ORIGINAL_POSITIONS))
            candidates += [v.get(ORIGINAL_POSITIONS) for v in params.values() if isinstance(v, dict)]
    return next((c for c in candidates if _is_int(c) and c > 0), None)


def shrink_rope(tiny: dict[str, Any], orig: dict[str, Any]) -> None:
    """Fit ``tiny``'s RoPE parameters (flat, or nested per layer type) to its shrunk heads and context, in place.

    The context shrinks by ``tiny[max_position_embeddings] / orig[max_position_embeddings]``; every pre-training
    length shrinks by the same ratio, so yarn's and longrope's implicit factor (max / original) and llama3's
    "original < max" stay what the full model has."""
    before, after = orig.get(POSITIONS), tiny.get(POSITIONS)
    original = _original_positions(orig)
    if _is_int(before) and _is_int(after) and original and before % original == 0 and after >= before // original:
        # An integral extension factor (DeepSeek-V3: 163840 / 4096 = 40) stays exact: the tiny context becomes a
        # multiple of it, so yarn's explicit factor still equals max / original and Transformers has nothing to warn.
        factor = before // original
        after = tiny[POSITIONS] = after // factor * factor
    ratio = after / before if _is_int(before) and _is_int(after) and before > 0 else 1.0
    if ORIGINAL_POSITIONS in tiny:
        tiny[ORIGINAL_POSITIONS] = _scaled_positions(tiny[ORIGINAL_POSITIONS], ratio)
    for key in ROPE_KEYS:
        params = tiny.get(key)
        if not isinstance(params, dict):
            continue
        nested = {k: v for k, v in params.items() if isinstance(v, dict)}
        if nested:  # per layer type: {"full_attention": {...}, "sliding_attention": {...}}
            tiny[key] = {k: (_shrink_one(v, tiny, ratio) if isinstance(v, dict) else
                             _scaled_positions(v, ratio) if k == ORIGINAL_POSITIONS else v)
                         for k, v in params.items()}
        else:
            tiny[key] = _shrink_one(params, tiny, ratio)
