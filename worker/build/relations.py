"""Re-tie config fields that the per-field shrink rules break apart (MLA qk_head_dim, Mamba heads, Zamba's attention
width, Falcon-H1's SSM width, rotary_dim <= head_dim, per-layer head counts a multiple of the KV heads, MoE groups).
"""

from __future__ import annotations

from typing import Any

from worker.build.sizes import EXPERTS, HEAD_DIM_FIELDS, HIDDEN

MAMBA_HEAD_FIELDS = {"mamba_n_heads", "mamba_num_heads", "n_mamba_heads"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def fix_relations(d: dict[str, Any], orig: dict[str, Any]) -> None:
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
