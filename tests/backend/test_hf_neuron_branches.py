"""Hugging Face's own Neuron branches run on the simulated device, as on real Trainium.

Each test names the branch (file:line in transformers 5.23.0, accelerate 1.15.0 or trl 1.16.0, as installed) and
checks what it does now that the registered simulation stands in ``sys.modules`` as ``torch_neuronx``.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import transformers
from accelerate import PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import DistributedType
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments
from transformers.utils import import_utils

VERSIONS = {"transformers": "5.23.0", "accelerate": "1.15.0", "trl": "1.16.0"}


def test_the_libraries_are_the_versions_the_lines_are_cited_for() -> None:
    for name, want in VERSIONS.items():
        assert importlib.import_module(name).__version__ == want


@pytest.fixture
def fresh_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def test_transformers_sees_torch_neuron(monkeypatch) -> None:
    # utils/import_utils.py:611 is_torch_neuron_available: find_spec("torch_neuronx"), then torch.neuron.is_available()
    assert import_utils.is_torch_neuron_available()
    assert import_utils.is_torch_neuron_available.__wrapped__(check_device=True)
    # utils/import_utils.py:664: bf16 support is torch.neuron.is_bf16_supported()
    assert import_utils.is_torch_bf16_gpu_available()


def test_training_args_pick_neuron_and_its_compile_backend(tmp_path, fresh_state) -> None:
    # training_args.py:1937: device neuron:0 (and torch.neuron.set_device)
    assert TrainingArguments(output_dir=str(tmp_path), report_to=[]).device == torch.device("neuron:0")
    # training_args.py:1626: torch_compile's backend defaults to "neuron" (not for use_cpu)
    assert TrainingArguments(output_dir=str(tmp_path), report_to=[], torch_compile=True).torch_compile_backend == "neuron"
    cpu = TrainingArguments(output_dir=str(tmp_path), report_to=[], torch_compile=True, use_cpu=True)
    assert cpu.torch_compile_backend == "inductor" and cpu.device.type == "cpu"


def test_trainer_compiles_with_static_shapes_on_neuron(tmp_path, fresh_state) -> None:
    # trainer.py:800: TorchDynamoPlugin(dynamic=False) for backend neuron
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2))
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], torch_compile=True)
    trainer = transformers.Trainer(model=model, args=args)
    plugin = trainer.accelerator.state.dynamo_plugin
    assert (plugin.backend.value.lower(), plugin.dynamic) == ("neuron", False)
    assert next(trainer.model.parameters()).device.type == "neuron"


def test_generate_compiles_with_the_neuron_backend_on_a_static_cache() -> None:
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2)).to("neuron")
    # modeling_utils.py:4807: CompileConfig(backend="neuron", dynamic=False) for device type neuron
    config = model._default_compile_config()
    assert (config.backend, config.dynamic) == ("neuron", False)
    # generation/utils.py:2450 _valid_auto_compile_criteria: neuron is valid hardware; a static cache compiles
    cache = transformers.StaticCache(config=model.config, max_cache_len=8)
    assert model._valid_auto_compile_criteria({"past_key_values": cache}, model.generation_config)


def test_distributed_backend_map_names_neuron() -> None:
    # distributed/utils.py:90
    from transformers.distributed.utils import get_distributed_backend

    assert get_distributed_backend("neuron") == "neuron"


def test_accelerate_picks_neuron(fresh_state, monkeypatch) -> None:
    monkeypatch.delenv("ACCELERATE_TORCH_DEVICE", raising=False)
    # state.py:750: the default device is neuron (state.py:838: its current core)
    state = PartialState()
    assert state.device.type == "neuron" and state.distributed_type == DistributedType.NO
    # state.py:796: a launched rank (LOCAL_RANK set) gets backend neuron and MULTI_NEURON
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert state._prepare_backend() == ("neuron", DistributedType.MULTI_NEURON)


def test_accelerate_seeds_checkpoints_and_frees_neuron(monkeypatch) -> None:
    from accelerate.utils import memory, random

    calls = []
    monkeypatch.setattr(torch.neuron, "manual_seed_all", lambda s: calls.append(("seed", s)))
    monkeypatch.setattr(torch.neuron, "empty_cache", lambda: calls.append(("empty_cache",)))
    random.set_seed(7)  # utils/random.py:69
    memory.clear_device_cache()  # utils/memory.py:65
    # torch.manual_seed seeds every device module once (torch/random.py), accelerate's Neuron branch once more
    assert calls == [("seed", 7), ("seed", 7), ("empty_cache",)]
    # checkpointing.py:172/311: the Neuron RNG states are saved per core and restored
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    drawn = torch.rand(3)
    torch.neuron.set_rng_state_all(states)
    assert torch.equal(torch.rand(3), drawn)


def test_accelerate_gather_object_pads_on_neuron(monkeypatch) -> None:
    # utils/operations.py:519: on neuron, gather_object takes _neuron_gather_object (power-of-two padded sizes)
    from accelerate.utils import operations

    seen = []
    monkeypatch.setattr(operations, "_neuron_gather_object", lambda obj: seen.append(obj) or [obj])
    monkeypatch.setattr(operations, "PartialState", lambda: type("S", (), {
        "distributed_type": DistributedType.MULTI_NEURON, "device": torch.device("neuron")})())
    assert operations.gather_object({"a": 1}) == [{"a": 1}] and seen == [{"a": 1}]


def test_device_map_auto_has_no_neuron_branch() -> None:
    # utils/modeling.py:757 get_max_memory: no neuron branch, so "auto" budgets only the CPU (the docstring's claim)
    from accelerate.utils.modeling import get_max_memory

    assert set(get_max_memory()) == {"cpu"}


@pytest.mark.parametrize("module, cls, line", [
    ("trl.trainer.sft_config", "SFTConfig", 313), ("trl.trainer.dpo_config", "DPOConfig", 388),
    ("trl.trainer.grpo_config", "GRPOConfig", 1057), ("trl.trainer.rloo_config", "RLOOConfig", 628),
    ("trl.trainer.kto_config", "KTOConfig", 264), ("trl.trainer.reward_config", "RewardConfig", 189),
    ("trl.trainer.distillation_config", "DistillationConfig", 406),
])
def test_trl_pads_to_128_on_neuron(module: str, cls: str, line: int, tmp_path, fresh_state) -> None:
    config_cls = getattr(importlib.import_module(module), cls)
    assert config_cls(output_dir=str(tmp_path), report_to=[]).pad_to_multiple_of == 128, f"{module}:{line}"
    on_cpu = config_cls(output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=False)
    assert on_cpu.pad_to_multiple_of is None


def test_trl_names_the_neuron_device(monkeypatch) -> None:
    # trl/trainer/base_trainer.py:104: torch.neuron.get_device_properties(0).name
    assert "simulated" in torch.neuron.get_device_properties(0).name
