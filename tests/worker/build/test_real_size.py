"""The real-size plan from config.json alone (meta device, nothing allocated) against published parameter counts and
the real-hardware records (/work/shared/reference/realhw-evidence.md).

Tolerance for parameter counts: 2%. Publishers round their counts (8.2B, 46.7B, 671B) and some count weights a
Transformers class leaves out or ties (DeepSeek-V3's 14B multi-token-prediction module is in its 685B download,
not in its 671B count); 2% holds every rounding here and is the issue's stated bar (8.03B for Llama-3.1-8B).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import Qwen3_5MoeTextConfig

from compat.plan import BASIS, PlanHardware, plan_model
from worker.build.real_size import active_hardware, count_full_parameters, plan_config
from worker.catalog.corpus_models import CORPUS_DIR

REALHW = Path(__file__).resolve().parents[2] / "data" / "realhw"
GIB = 1024**3


def _hw(lnc: int) -> PlanHardware:
    # Trn2 as neuron_backend/hardware/profiles/trn2.json states it (8 NeuronCore-v3, 96 GiB per chip), at LNC=lnc.
    return PlanHardware(profile="trn2", generation="Trn2", cores_per_chip=8, hbm_per_chip_bytes=96 * GIB, lnc=lnc)


# (corpus file, published total parameters, where it is published)
PUBLISHED = [
    ("llama3_1_8b_instruct.json", 8.03e9,
     "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct (the Hub's safetensors size, 8.03B params; issue 33)"),
    ("qwen3_8b.json", 8.2e9,
     "https://huggingface.co/Qwen/Qwen3-8B model card: 'Number of Parameters: 8.2B'"),
    ("qwen2_5_7b_instruct.json", 7.61e9,
     "docker/model-runner qwen2.5.md (Qwen2.5-7B-Instruct, 7B-F16: 7.61B parameters)"),
    ("mixtral_8x7b_v0_1.json", 46.7e9,
     "https://mistral.ai/news/mixtral-of-experts/ ('Mixtral has 46.7B total parameters')"),
    ("deepseek_v3.json", 671e9,
     "https://arxiv.org/abs/2412.19437 ('671B total parameters with 37B activated for each token')"),
]


@pytest.mark.parametrize(("name", "published", "source"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_parameter_count_matches_the_published_count(name: str, published: float, source: str) -> None:
    total, _ = count_full_parameters(json.loads((CORPUS_DIR / name).read_text()))
    assert abs(total - published) / published <= 0.02, f"{total:,} vs {published:,.0f} ({source})"


def test_qwen3_32b_fits_the_tp8_it_ran_at() -> None:
    # Record: "Qwen3-32B also ran at tp8" on trn2 (realhw-evidence.md, source A, NIGHT_LEARNINGS @ fc4d8a71).
    cfg = json.loads((REALHW / "qwen3_32b.json").read_text())
    one_core_each = plan_config(cfg, hardware=_hw(lnc=1))  # 12 GiB per NeuronCore: tp8 is the smallest that fits
    assert one_core_each.tensor_parallel == 8 and one_core_each.instance == "trn2.48xlarge"
    default = plan_config(cfg, hardware=_hw(lnc=2))  # 24 GiB per logical core: fewer suffice, never more than 8
    assert default.tensor_parallel is not None and default.tensor_parallel <= 8
    at_tp8 = default.weight_bytes / 8 + default.kv_cache_bytes / 8
    assert at_tp8 <= _hw(lnc=2).bytes_per_core
    assert default.basis == BASIS


def test_qwen3_5_35b_a3b_goes_out_of_memory_with_replicated_experts() -> None:
    # Record: Qwen3.5-35B-A3B "OOM at about 22 GB per core. Experts were replicated on every rank"; with expert
    # parallelism it ran eager at tp16 (realhw-evidence.md, source A; RECIPE.md @ 6891802b: 40 layers, 256 experts,
    # 16 attention heads). Transformers' defaults "yield a similar configuration to that of Qwen/Qwen3.5-35B-A3B"
    # (Qwen3_5MoeTextConfig's docstring, transformers 5.23.0).
    cfg = {**Qwen3_5MoeTextConfig().to_dict(), "architectures": ["Qwen3_5MoeForCausalLM"]}
    assert (cfg["num_hidden_layers"], cfg["num_experts"], cfg["num_attention_heads"]) == (40, 256, 16)
    total, experts = count_full_parameters(cfg, "Qwen3_5MoeForCausalLM")
    assert abs(total - 35e9) / 35e9 <= 0.02  # the model's name: 35B total
    replicated = plan_model(cfg, total, _hw(lnc=2), expert_parameters=experts, replicate_experts=True)
    assert replicated.tensor_parallel is None  # every rank holds all experts: no degree fits 24 GiB
    assert experts * 2 > 22e9  # the experts alone (bf16) exceed what the record ran out at
    sharded = plan_model(cfg, total, _hw(lnc=2), expert_parameters=experts)
    assert sharded.tensor_parallel is not None and sharded.tensor_parallel <= 16


def test_active_hardware_is_the_profiles() -> None:
    hw = active_hardware()
    assert hw.cores_per_chip % hw.lnc == 0 and hw.bytes_per_core * hw.logical_per_chip <= hw.hbm_per_chip_bytes
