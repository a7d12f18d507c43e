"""The ``lora`` check's computation: peft LoRA adapters on an architecture's attention projections, one AdamW step.

Target modules are discovered per architecture (linear layers under an attention module), with a per-architecture
table (LORA_TARGETS) where discovery finds none; the same step runs on the device and on the CPU reference.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import torch
from peft import LoraConfig, get_peft_model
from transformers.pytorch_utils import Conv1D

from worker.run.reference.finetune_params import LORA_ALPHA, LORA_RANK, LORA_TARGETS
from worker.run.reference.reference import train_step

# Leaf names Transformers 5 fuses at load (gate_proj + up_proj -> gate_up_proj, transformers/conversion_mapping.py):
# peft refuses to adapt one without the other ("Cannot convert PEFT target(s) gate_proj without also targeting
# up_proj because they are fused into gate_up_proj", seen on AfmoeForCausalLM, whose attention has a gate_proj),
# and they are MLP names anyway: never an attention target.
_MLP_LEAVES = frozenset({"gate_proj", "up_proj", "down_proj", "gate_up_proj"})
# "mixer" is no attention name: hybrid models (FalconH1) call their Mamba block the mixer.
_ATTENTION_CLASS = re.compile(r"attention|attn|selfattn", re.I)
_ATTENTION_PATH = re.compile(r"(^|\.)(self_attn|attn|attention|self_attention|attn_layer)(\.|$)", re.I)


@dataclass(frozen=True)
class Targets:
    names: list[str]  # full module names (or suffixes, for the table) handed to LoraConfig.target_modules
    rule: str  # "discovered" | "table" | "all-linear"


def _is_linear(module: torch.nn.Module) -> bool:
    # peft's LoRA wraps nn.Linear and Transformers' Conv1D (GPT-2's projections, fan_in_fan_out)
    # (peft/tuners/lora/layer.py dispatch_default).
    return isinstance(module, torch.nn.Linear | Conv1D)


def discover_targets(model: torch.nn.Module) -> Targets:
    """The attention projections of ``model``: linear layers whose parent module is an attention block (by class
    name or attribute path); else the table entry for its model_type; else every linear layer but the output head."""
    classes = {name: type(mod).__name__ for name, mod in model.named_modules()}
    found = []
    for name, mod in model.named_modules():
        if not name or not _is_linear(mod) or name.rpartition(".")[2] in _MLP_LEAVES:
            continue
        parent = name.rpartition(".")[0]
        if _ATTENTION_CLASS.search(classes.get(parent, "")) or _ATTENTION_PATH.search(parent):
            found.append(name)
    if found:
        return Targets(found, "discovered")
    model_type = getattr(getattr(model, "config", None), "model_type", "")
    if model_type in LORA_TARGETS:
        return Targets(list(LORA_TARGETS[model_type]), "table")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linear = [n for n, m in model.named_modules() if n and _is_linear(m) and m is not head]
    return Targets(linear, "all-linear")


def lora_config(targets: Targets) -> LoraConfig:
    # init_lora_weights=False: B random instead of zero (peft/tuners/lora/config.py), so the first step has a
    # non-zero gradient for A as well and the adapted forward differs from the base one. fan_in_fan_out for
    # Conv1D layers is set by peft itself (with a warning) when it wraps one.
    return LoraConfig(r=LORA_RANK, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules=targets.names,
                      init_lora_weights=False, bias="none")


def add_adapters(base: torch.nn.Module, targets: Targets, seed: int) -> torch.nn.Module:
    """``get_peft_model`` with a fixed seed (the adapters' random init)."""
    torch.manual_seed(seed)
    return get_peft_model(base, lora_config(targets))


def adapter_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().to("cpu").clone() for n, p in model.named_parameters() if p.requires_grad}


def load_adapter_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy the reference's adapter weights into ``model`` (the device's random init need not match the CPU's)."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value.to(params[name].device, params[name].dtype))


def frozen_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach() for n, p in model.named_parameters() if not p.requires_grad}


def lora_step(model: torch.nn.Module, inputs: dict[str, torch.Tensor], device: str = "cpu"
              ) -> dict[str, torch.Tensor]:
    """One AdamW step over the adapter weights: loss, flattened adapter gradients, adapter weights after the step."""
    return train_step(model, inputs, device)


def golden_copy(model: torch.nn.Module) -> torch.nn.Module | None:
    """An fp64 copy of a CPU peft model, or None when the architecture cannot run in fp64."""
    try:
        return copy.deepcopy(model).to(torch.float64)
    except Exception:  # noqa: BLE001 - fp64 is a nicety; the judge then uses the fp32 reference
        return None
