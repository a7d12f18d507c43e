"""Layer cutting keeps one layer of each kind and keeps every per-layer field consistent (pure functions)."""

from __future__ import annotations

from worker.build.layer_pattern import choose_layers, cut_layers


def test_plain_stack_is_cut_to_two_layers():
    out = cut_layers({"num_hidden_layers": 32, "hidden_size": 64})
    assert out["num_hidden_layers"] == 2


def test_sliding_full_pattern_keeps_both_kinds():
    types = (["sliding_attention"] * 5 + ["full_attention"]) * 4
    out = cut_layers({"num_hidden_layers": 24, "layer_types": types})
    assert out["num_hidden_layers"] == len(out["layer_types"])
    assert set(out["layer_types"]) == {"sliding_attention", "full_attention"}


def test_index_lists_are_renumbered_to_kept_layers():
    # Bamba-style: attention only at layers 9 and 18 of 32; the cut must keep one and renumber it.
    out = cut_layers({"num_hidden_layers": 32, "attn_layer_indices": [9, 18]})
    assert out["num_hidden_layers"] >= 2
    assert out["attn_layer_indices"] and all(0 <= i < out["num_hidden_layers"] for i in out["attn_layer_indices"])
    assert len(out["attn_layer_indices"]) < out["num_hidden_layers"]  # some layers are not attention


def test_pattern_string_is_cut_character_by_character():
    pattern = "M-M-M*-M-M-M*-M-M-M*"
    out = cut_layers({"num_hidden_layers": len(pattern), "hybrid_override_pattern": pattern})
    assert len(out["hybrid_override_pattern"]) == out["num_hidden_layers"]
    assert set(out["hybrid_override_pattern"]) == {"M", "-", "*"}


def test_non_pattern_string_of_layer_length_is_left_alone():
    # BigBird's attention_type happens to be 12 characters long in a 12-layer config.
    out = cut_layers({"num_hidden_layers": 12, "attention_type": "block_sparse"})
    assert out["attention_type"] == "block_sparse"
    assert out["num_hidden_layers"] == 2


def test_periodic_rules_shrink_to_period_two_and_four_layers():
    out = cut_layers({"num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 4,
                      "expert_layer_period": 2, "expert_layer_offset": 1})
    assert out["num_hidden_layers"] == 4
    assert (out["attn_layer_period"], out["attn_layer_offset"]) == (2, 1)
    attn = [i for i in range(4) if i % out["attn_layer_period"] == out["attn_layer_offset"]]
    assert attn and len(attn) < 4  # both mamba and attention layers remain


def test_per_layer_config_keys_follow_the_cut_and_id2label_does_not():
    cfg = {"num_hidden_layers": 30, "id2label": {0: "LABEL_0", 1: "LABEL_1"},
           "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
           "per_layer_config": {f"{i:02d}": {"head_dim": 512} for i in (5, 11, 17, 23, 29)}}  # as Gemma 4
    out = cut_layers(cfg)
    assert out["id2label"] == {0: "LABEL_0", 1: "LABEL_1"}
    full = [i for i, t in enumerate(out["layer_types"]) if t == "full_attention"]
    assert list(out["per_layer_config"]) == [f"{i:02d}" for i in full]


def test_all_layers_fields_stay_all_layers():
    out = cut_layers({"num_hidden_layers": 12, "num_kv_shared_layers": 12, "num_blocks": 12})
    assert out["num_kv_shared_layers"] == out["num_hidden_layers"] == out["num_blocks"]


def test_explicit_keep_list():
    assert choose_layers({"layer_types": ["a", "a", "b", "b"]}, 4) == [0, 2]
    out = cut_layers({"num_hidden_layers": 6, "layer_types": list("abcabc")}, keep=[0, 3, 4])
    assert out["layer_types"] == ["a", "a", "b"] and out["num_hidden_layers"] == 3
