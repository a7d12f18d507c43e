"""RoPE parameters and per-layer/per-head list fields shrink consistently with the tiny model (worker.build.rope,
tiny_config): every rope_scaling variant Transformers 5.23 validates stays valid and means what it meant."""

from __future__ import annotations

import json

import pytest

from compat.results import ArchitectureEntry
from worker.build.rope import resample, split_sections
from worker.build.tiny_config import shrink, shrink_dict, shrink_size_list
from worker.catalog.corpus_models import CORPUS_DIR

CORPUS = CORPUS_DIR  # the cited config corpus, shipped as product data (issue 33)


def _tiny(name: str, **override: object):  # noqa: ANN202 - a PretrainedConfig
    cfg = {**json.loads((CORPUS / name).read_text()), **override}
    return shrink(ArchitectureEntry(name=cfg["architectures"][0], model_type=cfg["model_type"], rank=1, config=cfg))


def test_resample_keeps_the_ends_and_the_order() -> None:
    values = [float(i) for i in range(48)]
    assert resample(values, 8) == [0.0, 7.0, 13.0, 20.0, 27.0, 34.0, 40.0, 47.0]
    assert resample(values, 48) == values and resample(values, 1) == [0.0] and resample(values, 0) == []


@pytest.mark.parametrize(("sections", "total", "expected"), [
    ([11, 11, 10], 2, [1, 1, 0]), ([16, 24, 24], 8, [2, 3, 3]), ([24, 20, 20], 32, [12, 10, 10]), ([8], 4, [4])])
def test_mrope_sections_keep_their_proportions_and_sum_to_half_the_rotary_dim(sections, total, expected) -> None:
    assert split_sections(sections, total) == expected and sum(expected) == total


@pytest.mark.parametrize("name", ["phi3_5_mini_instruct.json", "phi3_mini_128k_instruct.json",
                                  "phi4_mini_instruct.json", "minicpm3_4b.json"])
def test_longrope_factors_have_one_entry_per_tiny_rotary_frequency(name: str) -> None:
    # Finding 2: the factors stayed 48 long (the full model's head_dim / 2), the tiny model needs head_dim / 2.
    tiny = _tiny(name)
    rope = tiny.rope_parameters
    head_dim = getattr(tiny, "head_dim", None) or tiny.hidden_size // tiny.num_attention_heads
    half = int(head_dim * rope.get("partial_rotary_factor", 1.0)) // 2
    assert rope["rope_type"] == "longrope"
    assert len(rope["short_factor"]) == len(rope["long_factor"]) == half


def test_phi3_longrope_keeps_its_extension_factor() -> None:
    full = json.loads((CORPUS / "phi3_mini_128k_instruct.json").read_text())
    tiny = _tiny("phi3_mini_128k_instruct.json")
    original = tiny.rope_parameters["original_max_position_embeddings"]
    assert tiny.max_position_embeddings / original == \
        full["max_position_embeddings"] / full["original_max_position_embeddings"]


@pytest.mark.parametrize("name", ["deepseek_v3.json", "gpt_oss_120b.json", "olmo3_1_32b_instruct.json"])
def test_yarn_factor_still_equals_max_over_original(name: str) -> None:
    tiny = _tiny(name)
    rope = tiny.rope_parameters
    rope = rope.get("full_attention", rope)  # Olmo 3 nests it per layer type
    assert rope["rope_type"] == "yarn"
    assert tiny.max_position_embeddings / rope["original_max_position_embeddings"] == rope["factor"]


@pytest.mark.parametrize("name", ["llama3_1_8b_instruct.json", "llama3_2_1b_instruct.json"])
def test_llama3_original_length_stays_below_the_context(name: str) -> None:
    full = json.loads((CORPUS / name).read_text())
    tiny = _tiny(name)
    rope = tiny.rope_parameters
    assert rope["rope_type"] == "llama3"
    assert rope["original_max_position_embeddings"] < tiny.max_position_embeddings
    assert tiny.max_position_embeddings // rope["original_max_position_embeddings"] == \
        full["max_position_embeddings"] // full["rope_scaling"]["original_max_position_embeddings"]


def test_dynamic_rope_keeps_its_factor() -> None:
    tiny = _tiny("llama3_2_1b_instruct.json", rope_scaling={"rope_type": "dynamic", "factor": 4.0})
    assert tiny.rope_parameters["rope_type"] == "dynamic" and tiny.rope_parameters["factor"] == 4.0


def test_mrope_sections_sum_to_half_the_tiny_rotary_dim() -> None:
    cfg = json.loads((CORPUS / "qwen3_5_9b.json").read_text())
    entry = ArchitectureEntry(name="Qwen3_5ForCausalLM", model_type=cfg["model_type"], rank=1, config=cfg)
    text = shrink(entry)
    rope = text.rope_parameters
    assert sum(rope["mrope_section"]) == int(text.head_dim * rope["partial_rotary_factor"]) // 2


def test_per_layer_head_counts_shrink_in_proportion_and_stay_grouped() -> None:
    # Laguna: 48 heads on full-attention layers, 64 on sliding ones, 8 KV heads: the tiny layers still differ and
    # every count stays a multiple of the tiny KV heads.
    tiny = _tiny("laguna_xs2_fp8.json")
    heads = tiny.num_attention_heads_per_layer
    assert len(heads) == tiny.num_hidden_layers == len(tiny.layer_types)
    assert len(set(heads)) == 2 and max(heads) <= 8
    assert all(h % tiny.num_key_value_heads == 0 for h in heads)
    by_type = dict(zip(tiny.layer_types, heads, strict=True))
    assert by_type["sliding_attention"] > by_type["full_attention"]


def test_per_layer_sizes_shrink_in_proportion_and_other_int_lists_do_not() -> None:
    d = {"num_hidden_layers": 4, "hidden_size": 4096, "vocab_size": 32000, "mlp_only_layers": [0, 3],
         "intermediate_size": [8192, 8192, 4096, 4096], "num_key_value_heads": [8, 8, 8, 8],
         "eos_token_id": [1, 2], "mrope_section": [16, 24, 24]}
    assert shrink_size_list("intermediate_size", d["intermediate_size"], d) == [256, 256, 128, 128]
    assert shrink_size_list("num_key_value_heads", d["num_key_value_heads"], d) == [2, 2, 2, 2]
    for name in ("mlp_only_layers", "eos_token_id", "mrope_section"):  # indices, token ids, sections: no size rule
        assert shrink_size_list(name, d[name], d) == d[name]
    tiny = shrink_dict(dict(d))
    assert set(tiny["intermediate_size"]) <= {128, 256} and len(tiny["intermediate_size"]) == \
        tiny["num_hidden_layers"]


def test_a_stack_described_only_by_a_per_layer_list_is_cut() -> None:
    # Transformers 5.23's NemotronHConfig keeps layers_block_type (52 entries) and no depth field: it was left
    # at 52 layers (1.3M parameters, minutes per self-check).
    tiny = _tiny("nemotron3_nano_30b_a3b.json")
    assert len(tiny.layers_block_type) == 3
    assert set(tiny.layers_block_type) == {"linear_attention", "moe", "full_attention"}
