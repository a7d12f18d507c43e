"""The public functions the harness calls: device info, numerics policy, fallback and compile statistics, switches.

Switches change the in-process settings and drop cached per-op decisions so the next op sees them.
"""

from __future__ import annotations

from typing import Any

from neuron_backend import numerics, profiles, registration, stats
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedOpError

BACKEND_VERSION = "0.1.0"


def _clear() -> None:
    from neuron_backend import dispatch, policy

    dispatch.clear_cache()
    policy._rejections.clear()


def fallback_ops() -> list[str]:
    """Ops that ran on the CPU fallback in this process, e.g. ``"aten::histc (Long)"``, first use first."""
    return stats.fallback_ops()


def reset_fallback_ops() -> None:
    stats.reset_fallback_ops()


def numerics_policy() -> str:
    """``"bf16_matmul"`` when compiler-style matmul auto-cast is on (default), else ``"fp32"``."""
    return numerics.policy()


def host_syncs() -> int:
    """Device-to-host value reads (``.item()``, ``bool(t)``, ``.tolist()``) in this process."""
    return stats.host_syncs()


def compile_stats() -> dict[str, int]:
    """``{"compilations", "recompilations", "graphs"}`` of the ``neuron`` torch.compile backend in this process."""
    return stats.compile_stats()


def reset_compile_stats() -> None:
    stats.reset_compile_stats()


def device_info() -> dict[str, Any]:
    """What the harness records about the device under test."""
    simulated = registration._state["registered"] is True
    return {
        "name": "neuron",
        "simulated": simulated,
        "profile": CONFIG.profile,
        "profiles": profiles.available(),
        "cores": CONFIG.cores,
        "memory_per_core": CONFIG.memory_per_core,
        "cpu_fallback": CONFIG.cpu_fallback,
        "backend_version": BACKEND_VERSION,
        "policy": numerics.policy(),
        "not_registered_reason": registration.reason_not_registered(),
    }


def set_numerics(autocast_matmul: bool) -> None:
    """Switch bf16 matmul numerics on/off in this process (NEURON_AUTOCAST_MATMUL sets the start value)."""
    CONFIG.autocast_matmul = bool(autocast_matmul)
    _clear()


def set_cpu_fallback(enabled: bool) -> None:
    """Switch the CPU fallback on/off in this process (NEURON_CPU_FALLBACK sets the start value)."""
    CONFIG.cpu_fallback = bool(enabled)
    _clear()


def set_profile(name: str) -> None:
    """Select another shipped profile in this process (NEURON_PROFILE sets the start value)."""
    profiles.load(name)  # validates
    CONFIG.profile = name
    _clear()


def unwrap_error(exc: BaseException) -> NeuronUnsupportedOpError | None:
    """The typed device error inside ``exc`` (itself, or wrapped by Dynamo's BackendCompilerFailed/graph break)."""
    seen = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, NeuronUnsupportedOpError):
            return e
        stack += [getattr(e, "inner_exception", None), getattr(e, "neuron_error", None), e.__cause__, e.__context__]
    return None
