"""Issue 13's findings on submitted configs, one test each: native auto_map configs accepted (1), non-causal classes
and Transformers-rejected values refused naming the field, NaN/Infinity kept (3), hostile counts refused by the pure
cap check before anything is imported or built (4), a model id and an upload that disagree refused."""

from __future__ import annotations

import json
import math

import pytest

from service import validation
from service.config_limits import LIMITS, MAX_LAYER_EXPERTS, CapExceeded, check_caps
from service.validation import InvalidInput, check_config
from worker.catalog.corpus_models import CORPUS_DIR

CORPUS = CORPUS_DIR  # the cited config corpus, shipped as product data (issue 33)
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


def _real(name: str) -> dict:
    return json.loads((CORPUS / name).read_text())


@pytest.mark.parametrize("name", ["phi3_5_mini_instruct.json", "phi4_mini_instruct.json", "deepseek_v3.json",
                                  "nemotron3_nano_30b_a3b.json"])
def test_native_architectures_with_an_auto_map_are_accepted_with_a_note(name: str) -> None:
    # Finding 1: all four got 422 "needs trust_remote_code".
    checked = check_config(_real(name), 10**13)
    assert checked.architecture == _real(name)["architectures"][0] and checked.params > 10**9
    assert any(n.startswith("auto_map ignored") for n in checked.notes)


@pytest.mark.parametrize("arch", ["BertModel", "LlamaModel", "PreTrainedModel"])
def test_classes_that_are_no_causal_lm_are_refused_naming_architectures(arch: str) -> None:
    # Finding 3: they got 202 and four reference_fail.
    model_type = "bert" if arch == "BertModel" else "llama"
    with pytest.raises(InvalidInput) as info:
        check_config({**LLAMA, "model_type": model_type, "architectures": [arch]}, 10**12)
    assert info.value.field == "architectures" and "not a causal-LM class" in info.value.message


def test_non_finite_floats_are_kept_and_noted() -> None:
    # Finding 3: NaN/Infinity were silently nulled. A value Transformers accepts is kept as sent.
    cfg = {**LLAMA, "rms_norm_eps": math.nan, "extra_limit": [0.0, math.inf]}
    checked = check_config(cfg, 10**12)
    assert checked.notes == ["non-finite values kept as sent: rms_norm_eps, extra_limit[1]"]
    assert math.isnan(cfg["rms_norm_eps"]) and cfg["extra_limit"][1] == math.inf  # untouched


@pytest.mark.parametrize(("cfg", "field"), [
    ({**LLAMA, "num_hidden_layers": math.nan}, "num_hidden_layers"),  # Transformers' strict int check
    ({**LLAMA, "vocab_size": math.inf}, "vocab_size"),
    ({**LLAMA, "num_hidden_layers": 2.5}, "num_hidden_layers"),
    ({**LLAMA, "rope_scaling": {"rope_type": "yarn"}}, "rope_scaling"),  # yarn without its factor
])
def test_values_transformers_rejects_are_refused_naming_the_field(cfg: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_config(cfg, 10**12)
    assert info.value.field == field, info.value.message


HOSTILE = [
    ({"model_type": "mpt", "architectures": ["MptForCausalLM"], "n_layers": 2000, "d_model": 64}, "n_layers"),
    ({**LLAMA, "num_hidden_layers": 1024}, "num_hidden_layers"),  # the old cap: 13.6 s of meta build
    ({**LLAMA, "num_local_experts": 10**6}, "num_local_experts"),
    ({**LLAMA, "moe_num_experts": 4096, "num_hidden_layers": 64}, "moe_num_experts"),  # layers x experts
    ({**LLAMA, "vocab_size": 10**9}, "vocab_size"),
    ({**LLAMA, "max_seq_len": 10**12}, "max_seq_len"),
    ({**LLAMA, "n_heads": 10**7}, "n_heads"),
    ({**LLAMA, "hidden_size": 10**7}, "hidden_size"),
    ({**LLAMA, "intermediate_size": [128] * 3 + [10**9]}, "intermediate_size[3]"),
    ({**LLAMA, "text_config": {"num_hidden_layers": 10**5}}, "text_config.num_hidden_layers"),
    ({**LLAMA, "attn_config": {"kv_n_heads": 10**6}}, "attn_config.kv_n_heads"),
    ({**LLAMA, "hybrid_override_pattern": "M*" * 5000}, "hybrid_override_pattern"),
    ({**LLAMA, "layer_types": ["full_attention"] * 5000}, "layer_types"),
    ({**LLAMA, "num_hidden_layers": -3}, "num_hidden_layers"),
]


@pytest.mark.parametrize(("cfg", "field"), HOSTILE, ids=[f for _, f in HOSTILE])
def test_hostile_counts_are_refused_before_anything_is_imported_or_built(cfg: dict, field: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Finding 4: MPT n_layers=2000 took 22.7 s and Llama at the 1024-layer cap 13.6 s of meta build.
    def never(*_: object) -> None:
        raise AssertionError("reached a stage after the pure cap check")

    monkeypatch.setattr(validation, "registry_of", never)
    monkeypatch.setattr(validation, "_meta_params", never)
    with pytest.raises(InvalidInput) as info:
        check_config(cfg, 10**15)
    assert info.value.field == field, info.value.message


def test_cap_check_walks_sub_configs_but_never_iterates_long_lists() -> None:
    assert LIMITS["layers"] == 256 and MAX_LAYER_EXPERTS == 65_536
    with pytest.raises(CapExceeded, match="nests deeper"):
        nested: dict = {}
        node = nested
        for _ in range(20):
            node["c"] = {}
            node = node["c"]
        check_caps(nested)
    with pytest.raises(CapExceeded, match="entries; the limit"):
        check_caps({"quantization_ignore": list(range(10**5))})
    check_caps({**LLAMA, "vision_feature_layer": -1, "mscale_all_dim": 0.707, "reset_position_ids": True})


def test_the_meta_build_has_a_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    release = threading.Event()

    def slow(*_: object) -> int:
        release.wait(30)
        return 1

    monkeypatch.setattr(validation, "_meta_params", slow)
    try:
        with pytest.raises(InvalidInput) as info:
            check_config(LLAMA, 10**12, timeout_s=0.2)
        assert info.value.field == "config" and "longer than 0.2 s" in info.value.message
    finally:
        release.set()
