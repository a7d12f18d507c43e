"""The real-size plan of a model from its full config.json: parameters counted on the meta device (nothing is
allocated, no weights are read), the active neuron profile's hardware, then ``compat.plan``'s arithmetic.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
import transformers
from transformers import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from compat.plan import DEFAULT_BATCH, DEFAULT_TOKENS, Plan, PlanHardware, plan_model
from neuron_backend import config as neuron_config
from neuron_backend.hardware import profiles

# Keys a config class must not see: remote-code pointers and quantization (the plan counts at the config's dtype).
DROPPED_KEYS = ("auto_map", "quantization_config")


class PlanError(ValueError):
    """No plan: the config does not load in the installed Transformers, or its class cannot be instantiated."""


def active_hardware() -> PlanHardware:
    """The simulated neuron device's profile (NEURON_PROFILE) and Logical NeuronCore setting
    (NEURON_LOGICAL_NC_CONFIG); the profile cites each figure (``Profile.hardware.sources``)."""
    cfg = neuron_config.CONFIG
    hw = profiles.load(cfg.profile).hardware
    return PlanHardware(profile=cfg.profile, generation=hw.generation, cores_per_chip=hw.cores_per_chip,
                        hbm_per_chip_bytes=hw.hbm_per_chip_bytes, lnc=cfg.lnc, sources=hw.sources)


def _model_class(config: dict[str, Any], class_name: str | None = None) -> type:
    """The class a user loads for text generation: ``class_name`` (the class the model is judged as), else
    ``architectures[0]`` when Transformers has it, else the causal LM of the config's model_type."""
    name = class_name or (config.get("architectures") or [None])[0]
    cls = getattr(transformers, name, None) if isinstance(name, str) else None
    if cls is None:
        cls_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.get("model_type", ""))
        cls = getattr(transformers, cls_name, None) if cls_name else None
    if cls is None:
        raise PlanError(f"transformers {transformers.__version__} has no class for {name!r}")
    return cls


def count_full_parameters(config: dict[str, Any], class_name: str | None = None) -> tuple[int, int]:
    """(all parameters, expert parameters) of the full-size model, instantiated on the meta device. Experts are
    the parameters under a module path containing ``experts`` (shared experts excluded)."""
    model_type = config.get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise PlanError(f"model_type {model_type!r} is unknown to transformers {transformers.__version__}")
    cls = _model_class(config, class_name)
    raw = copy.deepcopy({k: v for k, v in config.items() if k not in DROPPED_KEYS})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cfg = CONFIG_MAPPING[model_type].from_dict(raw)
            wanted = getattr(cls, "config_class", None)
            if wanted is not None and not isinstance(cfg, wanted):
                subs = [getattr(cfg, k, None) for k in getattr(cfg, "sub_configs", {})]
                cfg = next((c for c in subs if isinstance(c, wanted)), cfg)
            with torch.device("meta"):
                model = cls(cfg)
        except Exception as exc:  # noqa: BLE001 - any config or init error is a reason, not a crash
            raise PlanError(f"cannot instantiate {cls.__name__} on the meta device: {type(exc).__name__}: "
                            f"{str(exc)[:200]}") from exc
    total = experts = 0
    for name, p in model.named_parameters():
        total += p.numel()
        parts = name.split(".")
        if "experts" in parts:
            experts += p.numel()
    return total, experts


def plan_config(config: dict[str, Any], *, tokens: int = DEFAULT_TOKENS, batch: int = DEFAULT_BATCH,
                hardware: PlanHardware | None = None, replicate_experts: bool = False,
                class_name: str | None = None) -> Plan:
    """The plan of ``config`` as ``class_name`` (default: its own class) on ``hardware`` (default: the active
    profile); PlanError when it has none."""
    total, experts = count_full_parameters(config, class_name)
    return plan_model(config, total, hardware or active_hardware(), tokens=tokens, batch=batch,
                      expert_parameters=experts, replicate_experts=replicate_experts)
