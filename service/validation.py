"""Validation of submitted input: Hub model ids, revisions, uploaded config.json (size, remote code, params).

Parameter counts come from building the model on torch's meta device: no memory is allocated.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_REPO_ID = 96
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
# Charset-level patterns for the OpenAPI schema; the full rules ('--', '..', edges) are checked below.
MODEL_ID_PATTERN = r"^([A-Za-z0-9._-]+/)?[A-Za-z0-9._-]+$"
REVISION_PATTERN = _REVISION.pattern

# Dimension fields: hard caps stop absurd values before anything is built (even on meta, building
# 10^9 layers would take forever). Values are well above any published model.
DIMENSION_CAPS: dict[str, int] = {
    "num_hidden_layers": 1024, "n_layer": 1024, "num_layers": 1024,
    "hidden_size": 131072, "n_embd": 131072, "d_model": 131072,
    "intermediate_size": 1_048_576, "n_inner": 1_048_576, "moe_intermediate_size": 1_048_576,
    "vocab_size": 4_194_304,
    "num_attention_heads": 4096, "n_head": 4096, "num_key_value_heads": 4096,
    "num_local_experts": 4096, "num_experts": 4096, "n_routed_experts": 4096,
    "max_position_embeddings": 16_777_216, "n_positions": 16_777_216,
}


class InvalidInput(ValueError):
    """Bad submitted input; ``field`` names what to fix (the API answers 422)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def validate_repo_id(repo_id: str) -> str:
    """Hub naming rules: ``name`` or ``namespace/name``; [A-Za-z0-9._-]; no '--'/'..'; no leading/trailing -/."""
    if not repo_id or len(repo_id) > MAX_REPO_ID:
        raise InvalidInput("model_id", f"model id must be 1-{MAX_REPO_ID} characters")
    parts = repo_id.split("/")
    if len(parts) > 2:
        raise InvalidInput("model_id", "model id is 'name' or 'namespace/name'")
    for part in parts:
        if not part or not _NAME.match(part):
            raise InvalidInput("model_id", "model id may contain only letters, digits, '.', '_', '-'")
        if part[0] in "-." or part[-1] in "-.":
            raise InvalidInput("model_id", "model id parts must not start or end with '-' or '.'")
    if "--" in repo_id or ".." in repo_id:
        raise InvalidInput("model_id", "model id must not contain '--' or '..'")
    return repo_id


def validate_revision(revision: str) -> str:
    """Branch, tag or commit sha: a conservative git-ref charset, no '..', '//', trailing '/' or '.lock'."""
    if not _REVISION.match(revision) or ".." in revision or "//" in revision or revision.endswith(("/", ".lock")):
        raise InvalidInput("revision", "revision must be a branch, tag or commit sha ([A-Za-z0-9._/-], max 128)")
    return revision


def parse_config(raw: bytes, max_bytes: int) -> dict[str, Any]:
    if len(raw) > max_bytes:
        raise InvalidInput("config", f"config.json is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        cfg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise InvalidInput("config", f"config.json is not valid JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise InvalidInput("config", "config.json must be a JSON object")
    return cfg


def _estimate(cfg: dict[str, Any]) -> float:
    """Rough decoder-only parameter count from the common dimension names, used to name the culprit field."""
    def get(*names: str, default: float) -> float:
        for n in names:
            v = cfg.get(n)
            if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
                return float(v)
        return default
    h = get("hidden_size", "n_embd", "d_model", default=1024)
    layers = get("num_hidden_layers", "n_layer", "num_layers", default=12)
    inter = get("intermediate_size", "n_inner", "moe_intermediate_size", default=4 * h)
    vocab = get("vocab_size", default=32000)
    experts = get("num_local_experts", "num_experts", "n_routed_experts", default=1)
    return 2 * vocab * h + layers * (4 * h * h + 3 * h * inter * experts)


def _culprit(cfg: dict[str, Any]) -> str:
    """The dimension field whose reduction to a modest value shrinks the estimate most."""
    base = _estimate(cfg)
    best, best_gain = "config", 0.0
    for name in DIMENSION_CAPS:
        if isinstance(cfg.get(name), int) and cfg[name] > 1:
            gain = base - _estimate({**cfg, name: 1})
            if gain > best_gain:
                best, best_gain = name, gain
    return best


def check_config(cfg: dict[str, Any], max_params: int) -> tuple[str, int]:
    """Validate an uploaded config; returns (architecture class name, parameter count). Never runs remote code."""
    if "auto_map" in cfg:
        raise InvalidInput("auto_map", "this architecture requires trust_remote_code, which is never enabled")
    model_type = cfg.get("model_type")
    archs = cfg.get("architectures")
    if not isinstance(model_type, str) or not model_type:
        raise InvalidInput("model_type", "config.json must name its model_type")
    if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)):
        raise InvalidInput("architectures", "config.json must list its architectures (class names)")
    for name, cap in DIMENSION_CAPS.items():
        v = cfg.get(name)
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InvalidInput(name, f"{name} must be a non-negative integer")
        if v > cap:
            raise InvalidInput(name, f"{name}={v} is above the limit {cap}")
    # Only now, for a config that passed the cheap checks: the API process imports torch and transformers when a
    # submitted config is measured on the meta device, not at start.
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        raise InvalidInput("model_type", f"unknown model_type {model_type!r} (not in transformers)")
    cls = getattr(transformers, archs[0], None)
    if cls is None or not isinstance(cls, type) or not hasattr(cls, "config_class"):
        raise InvalidInput("architectures", f"unknown architecture {archs[0]!r} (not in transformers)")
    if _estimate(cfg) > 50 * max_params:  # far over: refuse before building anything
        field = _culprit(cfg)
        raise InvalidInput(field, f"the model would exceed {max_params} parameters (field {field})")
    kwargs = {k: v for k, v in cfg.items() if k not in ("model_type", "transformers_version")}
    try:
        config = transformers.AutoConfig.for_model(model_type, **kwargs)
        with torch.device("meta"):
            model = cls(config)
        params = sum(p.numel() for p in model.parameters())
    except InvalidInput:
        raise
    except Exception as e:  # any malformed value surfaces here; the submitter gets the reason
        raise InvalidInput("config", f"config does not build {archs[0]}: {type(e).__name__}: {e}"[:500]) from None
    if params > max_params:
        field = _culprit(cfg)
        raise InvalidInput(field, f"the model would have {params} parameters, above the limit {max_params} "
                                  f"(largest contributor: {field})")
    return archs[0], int(params)
