"""The one remote-code rule: which config.json the installed Transformers runs with its own classes, and which needs
code from the model's repository (never run). Shared by the catalog, the API, the submit form and the worker.

Pure: the facts about the installed Transformers arrive as a ``NativeRegistry``, read from the ``transformers`` module
the caller has already imported (``registry_of``); this module imports nothing of Transformers itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class NativeRegistry:
    """What one installed Transformers provides natively."""

    version: str
    model_types: frozenset[str]  # every model_type with a native config class (CONFIG_MAPPING_NAMES)
    classes: frozenset[str]  # every name the transformers package exports (model classes among them)
    causal_lm: Mapping[str, str]  # model_type -> its causal-LM class (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)

    @property
    def causal_lm_classes(self) -> frozenset[str]:
        return frozenset(self.causal_lm.values())


_registries: dict[int, NativeRegistry] = {}


def registry_of(transformers: ModuleType) -> NativeRegistry:
    """The registry of an imported ``transformers`` module, read once per process (a few seconds the first time:
    reading the auto mappings imports them)."""
    cached = _registries.get(id(transformers))
    if cached is None:
        auto = transformers.models.auto
        causal: dict[str, str] = {}
        for model_type, value in auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
            # A model type may map to several classes (a tuple); the first is the one AutoModelForCausalLM builds.
            causal[model_type] = value[0] if isinstance(value, list | tuple) else value
        cached = NativeRegistry(version=transformers.__version__,
                                model_types=frozenset(auto.configuration_auto.CONFIG_MAPPING_NAMES),
                                classes=frozenset(dir(transformers)), causal_lm=causal)
        _registries[id(transformers)] = cached
    return cached


@dataclass(frozen=True)
class CodeVerdict:
    """The rule's answer for one config: native or remote code, why, and what was ignored on the way."""

    remote_code: bool
    field: str | None = None  # the config field that makes it remote code ("model_type" or "architectures")
    reason: str | None = None  # why remote code is needed; None when native
    notes: tuple[str, ...] = ()  # e.g. an auto_map that was ignored because the classes are native


def architecture_of(config: Mapping[str, Any]) -> str | None:
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return None


def remote_code_verdict(config: Mapping[str, Any], registry: NativeRegistry) -> CodeVerdict:
    """Transformers' own rule, applied to both names a checkpoint is loaded by.

    ``AutoConfig`` loads a config natively when its ``model_type`` has a native config class, whatever ``auto_map``
    says (it uses remote code only when asked to trust it); the harness then builds ``architectures[0]`` by name.
    So remote code is needed when either name is unknown to the installed Transformers. A native class with a
    foreign model_type (``kimi_k2`` on ``DeepseekV3ForCausalLM``, ``phi-msft`` on ``PhiForCausalLM``) is remote
    code: its config only loads through the repository's own configuration class. An ``auto_map`` on a native
    pair is ignored, and the verdict says so.
    """
    version = registry.version
    model_type = config.get("model_type")
    arch = architecture_of(config)
    has_map = "auto_map" in config
    hint = " (its auto_map points at the repository's own code, which is never run)" if has_map else ""
    if not isinstance(model_type, str) or model_type not in registry.model_types:
        return CodeVerdict(True, "model_type",
                           f"model_type {model_type!r} is not native to Transformers {version}{hint}")
    if arch is None or arch not in registry.classes:
        return CodeVerdict(True, "architectures",
                           f"architecture {arch!r} is not a class of Transformers {version}{hint}")
    notes = (f"auto_map ignored: {arch} and model_type {model_type!r} are native to Transformers {version}",) \
        if has_map else ()
    return CodeVerdict(False, notes=notes)


def needs_remote_code(config: Mapping[str, Any], registry: NativeRegistry) -> bool:
    return remote_code_verdict(config, registry).remote_code


def causal_lm_problem(config: Mapping[str, Any], registry: NativeRegistry) -> str | None:
    """Why ``architectures[0]`` is not a causal LM the harness can run (None when it is one).

    Only causal-LM classes have a ``generate`` and a next-token loss; a base model (``LlamaModel``), an encoder
    (``BertModel``) or an abstract class (``PreTrainedModel``) would make every check fail on the CPU reference."""
    arch = architecture_of(config)
    if arch in registry.causal_lm_classes:
        return None
    message = f"{arch} is not a causal-LM class of Transformers {registry.version}"
    suggestion = registry.causal_lm.get(str(config.get("model_type")))
    if suggestion and suggestion != arch:
        message += f"; the causal LM of model_type {config.get('model_type')!r} is {suggestion}"
    return message
