"""compat.native: the one remote-code rule, on a registry given as data (pure) and on the installed Transformers."""

from __future__ import annotations

import transformers

from compat.native import (
    NativeRegistry,
    causal_lm_problem,
    needs_remote_code,
    registry_of,
    remote_code_verdict,
)

REG = NativeRegistry(version="9.9", model_types=frozenset({"llama", "phi3", "deepseek_v3", "bert"}),
                     classes=frozenset({"LlamaForCausalLM", "LlamaModel", "Phi3ForCausalLM", "DeepseekV3ForCausalLM",
                                        "BertModel", "BertLMHeadModel", "PreTrainedModel"}),
                     causal_lm={"llama": "LlamaForCausalLM", "phi3": "Phi3ForCausalLM",
                                "deepseek_v3": "DeepseekV3ForCausalLM", "bert": "BertLMHeadModel"})
AUTO_MAP = {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XForCausalLM"}


def test_auto_map_on_native_classes_is_ignored_and_said() -> None:
    # Finding 1: Phi-3.5 / DeepSeek-V3 carry an auto_map but are native; they were refused as remote code.
    for cfg in ({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "auto_map": AUTO_MAP},
                {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "auto_map": None}):
        verdict = remote_code_verdict(cfg, REG)
        assert not verdict.remote_code and verdict.reason is None
        assert verdict.notes == (f"auto_map ignored: {cfg['architectures'][0]} and model_type "
                                 f"{cfg['model_type']!r} are native to Transformers 9.9",)
    assert remote_code_verdict({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, REG).notes == ()


def test_a_native_class_with_a_foreign_model_type_is_remote_code() -> None:
    # kimi_k2 on DeepseekV3ForCausalLM, phi-msft on PhiForCausalLM, rwkv5 on RwkvForCausalLM (the corpus has all).
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "auto_map": AUTO_MAP}
    verdict = remote_code_verdict(cfg, REG)
    assert verdict.remote_code and verdict.field == "model_type" and "'kimi_k2' is not native" in verdict.reason
    assert needs_remote_code({**cfg, "auto_map": None}, REG)  # with or without an auto_map: it cannot load


def test_an_unknown_class_is_remote_code_naming_architectures() -> None:
    verdict = remote_code_verdict({"architectures": ["MyOPTForCausalLM"], "model_type": "llama"}, REG)
    assert verdict.remote_code and verdict.field == "architectures" and "MyOPTForCausalLM" in verdict.reason


def test_only_causal_lm_classes_are_runnable() -> None:
    assert causal_lm_problem({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, REG) is None
    problem = causal_lm_problem({"architectures": ["LlamaModel"], "model_type": "llama"}, REG)
    assert problem == ("LlamaModel is not a causal-LM class of Transformers 9.9; the causal LM of model_type "
                       "'llama' is LlamaForCausalLM")
    assert "not a causal-LM class" in causal_lm_problem({"architectures": ["BertModel"], "model_type": "bert"}, REG)
    assert "not a causal-LM class" in causal_lm_problem({"architectures": ["PreTrainedModel"], "model_type": "x"},
                                                        REG)


def test_registry_of_the_installed_transformers() -> None:
    reg = registry_of(transformers)
    assert reg is registry_of(transformers)  # read once per process
    assert reg.version == transformers.__version__
    assert {"llama", "nemotron_h", "phi3"} <= reg.model_types and "kimi_k2" not in reg.model_types
    assert reg.causal_lm["llama"] == "LlamaForCausalLM" and "BertModel" not in reg.causal_lm_classes
    assert {"BertModel", "LlamaModel", "PreTrainedModel"} <= reg.classes
