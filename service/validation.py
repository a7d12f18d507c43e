"""Validation of submitted input: Hub model ids, revisions, and an uploaded config.json, cheapest check first.

A config goes through the pure cap check (``service.config_limits``), then the remote-code and causal-LM rules
(``compat.native``), then Transformers' own validation of its config class, and last a build on torch's meta device
(no memory allocated) under a time limit, which gives the exact parameter count. Each refusal names its field.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any, NamedTuple

from compat.configjson import non_finite_paths
from compat.native import causal_lm_problem, registry_of, remote_code_verdict
from service.config_limits import CapExceeded, category, check_caps

MAX_REPO_ID = 96
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
# Charset-level patterns for the OpenAPI schema; the full rules ('--', '..', edges) are checked below.
MODEL_ID_PATTERN = r"^([A-Za-z0-9._-]+/)?[A-Za-z0-9._-]+$"
REVISION_PATTERN = _REVISION.pattern


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
        # Python's json reads NaN/Infinity as Transformers writes them; they are kept, not nulled.
        cfg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise InvalidInput("config", f"config.json is not valid JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise InvalidInput("config", "config.json must be a JSON object")
    return cfg


class ConfigCheck(NamedTuple):
    """A config that passed: its class, its exact parameter count, and what the checks noted on the way."""

    architecture: str
    params: int
    notes: list[str]


_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _shape(cfg: dict[str, Any]) -> tuple[str, str]:
    model_type = cfg.get("model_type")
    archs = cfg.get("architectures")
    if not isinstance(model_type, str) or not model_type or len(model_type) > 64:
        raise InvalidInput("model_type", "config.json must name its model_type")
    if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)
            and _CLASS_NAME.match(archs[0])):
        raise InvalidInput("architectures", "config.json must list its architectures (class names)")
    return model_type, archs[0]


def _count(cfg: dict[str, Any], cat: str, default: float) -> float:
    """The largest positive integer among the top-level fields of one cost category."""
    values = [v for k, v in cfg.items() if isinstance(k, str) and category(k) == cat
              and isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return float(max(values)) if values else default


def _estimate(cfg: dict[str, Any]) -> float:
    """Rough decoder-only parameter count, used to refuse the absurd before building and to name the culprit."""
    h = _count(cfg, "hidden", 1024)
    layers = _count(cfg, "layers", 12)
    inter = _count(cfg, "width", 4 * h)
    vocab = _count(cfg, "vocab", 32000)
    experts = _count(cfg, "experts", 1)
    return 2 * vocab * h + layers * (4 * h * h + 3 * h * inter * experts)


def _culprit(cfg: dict[str, Any]) -> str:
    """The top-level count whose reduction to 1 shrinks the estimate most."""
    base = _estimate(cfg)
    best, best_gain = "config", 0.0
    for name, value in cfg.items():
        if isinstance(name, str) and category(name) and isinstance(value, int) and not isinstance(value, bool) \
                and value > 1:
            gain = base - _estimate({**cfg, name: 1})
            if gain > best_gain:
                best, best_gain = name, gain
    return best


_FIELD_IN_MESSAGE = re.compile(r"[`'\"]([A-Za-z_][A-Za-z0-9_]*)[`'\"]")


def _field_of(exc: Exception, cfg: dict[str, Any]) -> str:
    """The config field a Transformers error is about: the strict dataclass's field, the RoPE parameters for a
    RoPE validator, else the first config key the message quotes, else "config"."""
    text = str(exc)
    rope = "rope_scaling" if "rope_scaling" in cfg else "rope_parameters"
    if "validate_rope" in text or "rope_parameters" in text:
        return rope
    for name in _FIELD_IN_MESSAGE.findall(text):
        if name in cfg:
            return name
    return "config"


def _meta_params(torch: Any, cls: type, config: Any) -> int:
    with torch.device("meta"):
        model = cls(config)
    return int(sum(p.numel() for p in model.parameters()))


# One meta build at a time in this process: a slow one holds back the next instead of stacking CPU load.
_build_lock = threading.Lock()


def _timed(fn: Any, timeout_s: float, *args: Any) -> int:
    """``fn(*args)`` on a daemon thread, waited for at most ``timeout_s`` (queueing behind another build included).
    A build that overruns finishes in the background (it cannot be interrupted) and is refused here."""
    result: Future[int] = Future()

    def work() -> None:
        with _build_lock:
            if not result.set_running_or_notify_cancel():
                return
            try:
                result.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                result.set_exception(exc)

    threading.Thread(target=work, daemon=True, name="meta-build").start()
    try:
        return result.result(timeout=timeout_s)
    except FuturesTimeout:
        result.cancel()
        raise InvalidInput("config", f"building the model on the meta device took longer than {timeout_s:g} s "
                                     "(COMPAT_VALIDATION_TIMEOUT_S)") from None


def check_config(cfg: dict[str, Any], max_params: int, *, timeout_s: float = 10.0) -> ConfigCheck:
    """Validate an uploaded config, cheapest check first; never runs remote code."""
    model_type, arch = _shape(cfg)
    try:
        check_caps(cfg)
    except CapExceeded as exc:
        raise InvalidInput(exc.field, exc.message) from None
    if _estimate(cfg) > 50 * max_params:  # far over: refuse before importing or building anything
        field = _culprit(cfg)
        raise InvalidInput(field, f"the model would exceed {max_params} parameters (field {field})")
    # Only now, for a config that passed the cheap checks: the API process imports torch and transformers when a
    # submitted config is measured on the meta device, not at start.
    import torch
    import transformers

    registry = registry_of(transformers)
    verdict = remote_code_verdict(cfg, registry)
    if verdict.remote_code:
        raise InvalidInput(verdict.field or "architectures",
                           f"{verdict.reason}: it would need trust_remote_code, which is never enabled")
    problem = causal_lm_problem(cfg, registry)
    if problem:
        raise InvalidInput("architectures", problem)
    # A deep copy: Transformers fills defaults into nested dicts (rope_scaling) in place, and the config stored
    # and run must be exactly the one sent.
    kwargs = copy.deepcopy({k: v for k, v in cfg.items() if k not in ("model_type", "transformers_version",
                                                                         "auto_map")})
    try:
        config = transformers.AutoConfig.for_model(model_type, **kwargs)
    except Exception as e:  # Transformers' own refusal of a value: name the field it is about
        raise InvalidInput(_field_of(e, cfg), f"Transformers refuses this config: {type(e).__name__}: "
                                              f"{' '.join(str(e).split())}"[:500]) from None
    cls = getattr(transformers, arch)
    try:
        params = _timed(_meta_params, timeout_s, torch, cls, config)
    except InvalidInput:
        raise
    except Exception as e:  # any malformed value surfaces here; the submitter gets the reason
        raise InvalidInput("config", f"config does not build {arch}: {type(e).__name__}: {e}"[:500]) from None
    if params > max_params:
        field = _culprit(cfg)
        raise InvalidInput(field, f"the model would have {params} parameters, above the limit {max_params} "
                                  f"(largest contributor: {field})")
    notes = list(verdict.notes)
    paths = non_finite_paths(cfg)
    if paths:
        notes.append(f"non-finite values kept as sent: {', '.join(paths[:10])}")
    return ConfigCheck(arch, params, notes)

