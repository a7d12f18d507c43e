"""compat.plan: the real-size arithmetic (weights, KV cache, tensor-parallel degree, instance) on exact numbers.

Exact integers throughout: the plan is arithmetic on config fields, so no tolerance is needed.
"""

from __future__ import annotations

import json

import pytest

from compat.plan import (
    BASIS,
    PlanHardware,
    config_dtype,
    kv_cache_bytes,
    kv_shards,
    plan_model,
    plan_text,
    smallest_instance,
)
from worker.catalog.corpus_models import CORPUS_DIR

GIB = 1024**3
# Trn2 as the shipped trn2 profile states it (neuron_backend/hardware/profiles/trn2.json "hardware": 8 NeuronCore-v3, 96 GiB
# per chip, LNC=2 by default; its sources cite the AWS docs).
TRN2_LNC2 = PlanHardware(profile="trn2", generation="Trn2", cores_per_chip=8, hbm_per_chip_bytes=96 * GIB, lnc=2)
TRN2_LNC1 = PlanHardware(profile="trn2", generation="Trn2", cores_per_chip=8, hbm_per_chip_bytes=96 * GIB, lnc=1)


def _corpus(name: str) -> dict:
    return json.loads((CORPUS_DIR / name).read_text())


def test_llama_3_1_8b_kv_cache_is_layers_times_kv_heads_times_head_dim() -> None:
    cfg = _corpus("llama3_1_8b_instruct.json")  # 32 layers, 8 KV heads, head dim 4096/32 = 128, bfloat16
    assert kv_cache_bytes(cfg, 4096, 1) == 2 * 32 * 8 * 128 * 4096 * 2
    assert kv_cache_bytes(cfg, 1024, 3) == 2 * 32 * 8 * 128 * 1024 * 3 * 2


def test_sliding_and_linear_attention_layers_hold_less_cache() -> None:
    base = {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64,
            "sliding_window": 100}
    full = kv_cache_bytes(base, 1000)
    mixed = kv_cache_bytes({**base, "layer_types": ["sliding_attention", "full_attention", "linear_attention",
                                                    "full_attention"]}, 1000)
    per_token_layer = 2 * 2 * 16 * 2
    assert full == 4 * per_token_layer * 1000
    assert mixed == per_token_layer * (100 + 1000 + 0 + 1000)


def test_mla_caches_the_up_projected_keys_and_values() -> None:
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "kv_lora_rank": 16,
           "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8}
    assert kv_cache_bytes(cfg, 10) == 2 * 4 * (12 + 8) * 10 * 2


def test_dtype_is_the_configs_own_else_bf16() -> None:
    assert config_dtype({"torch_dtype": "float32"}) == "float32"
    assert config_dtype({"dtype": "torch.float16"}) == "float16"
    assert config_dtype({"text_config": {"torch_dtype": "float32"}}) == "float32"
    assert config_dtype({}) == "bfloat16"


@pytest.mark.parametrize(("heads", "kv", "tp", "split"), [
    (32, 8, 1, 1), (32, 8, 4, 4), (32, 8, 8, 8), (32, 8, 16, 8), (24, 8, 16, None), (16, 2, 16, 2), (16, 2, 4, 2),
    (12, 8, 3, None),
])
def test_kv_shards_needs_heads_divisible_and_kv_heads_divisible_or_replicated(heads: int, kv: int, tp: int,
                                                                             split: int | None) -> None:
    assert kv_shards(heads, kv, tp) == split


def test_smallest_degree_that_fits_one_core_then_cores_and_instance() -> None:
    cfg = {"num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 64}
    per_core = TRN2_LNC2.bytes_per_core
    assert per_core == 24 * GIB  # 96 GiB over 4 logical cores
    fits_one = plan_model(cfg, parameters=per_core // 4, hardware=TRN2_LNC2, tokens=1)
    assert (fits_one.tensor_parallel, fits_one.neuron_cores, fits_one.instance) == (1, 1, "trn2.48xlarge")
    needs_four = plan_model(cfg, parameters=per_core, hardware=TRN2_LNC2, tokens=1)  # 2 bytes each: 2 cores' worth
    assert needs_four.tensor_parallel == 4  # 2 would fit the weights exactly, not the cache with them
    assert needs_four.shard_bytes <= per_core < needs_four.weight_bytes / 2 + needs_four.kv_cache_bytes / 2
    assert BASIS in plan_text(needs_four.to_dict())


def test_no_valid_degree_fits_is_said_not_guessed() -> None:
    cfg = {"num_hidden_layers": 1, "num_attention_heads": 6, "num_key_value_heads": 6, "hidden_size": 60}
    plan = plan_model(cfg, parameters=100 * GIB, hardware=TRN2_LNC2, tokens=1)
    assert plan.tensor_parallel is None and plan.instance is None
    assert any("fits one NeuronCore" in n for n in plan.notes)


def test_instances_are_the_cited_sizes_smallest_first() -> None:
    assert smallest_instance("Trn2", 1) == "trn2.48xlarge"  # trn2.3xlarge is not on the cited page: left out
    assert smallest_instance("Trn2", 17) == "Trn2 UltraServer"
    assert smallest_instance("Trn1", 1) == "trn1.2xlarge"
    assert smallest_instance("Trn2", 65) is None
