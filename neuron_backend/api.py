"""The public functions the harness calls: device info, numerics policy, fallback and compile statistics, switches.

Switches change the in-process settings and drop cached per-op decisions so the next op sees them.
"""

from __future__ import annotations

from typing import Any

from neuron_backend import config, numerics, registration, stats
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedOpError
from neuron_backend.hardware import profiles

BACKEND_VERSION = "0.1.0"


def _clear() -> None:
    from neuron_backend import dispatch, policy

    dispatch.clear_cache()
    policy._rejections.clear()


def fallback_ops() -> list[str]:
    """Ops that ran on the CPU fallback in this process, e.g. ``"aten::histc (Long)"``, first use first."""
    return stats.fallback_ops()


def reset_fallback_ops() -> None:
    """Start a new record (the harness calls it before each check)."""
    stats.reset_fallback_ops()


# torch-neuronx's names for the same record (torch_neuronx/__init__.py in parmoham-aws/test-repo-parmoham @
# 98154b867aa24562a3213e520d9ad7fd41032291, pre-beta source, INDICATIVE). They live on ``neuron_backend`` only: the
# simulation never installs a ``torch_neuronx`` module, so a real install is never shadowed.
def get_fallback_ops() -> list[str]:
    """Names of the ops that ran on the CPU instead of the device (``"aten::histc"``), like torch_neuronx's."""
    return stats.fallback_op_names()


def get_executed_ops() -> list[str]:
    """Names of the ops that ran on the device, like torch_neuronx's."""
    return stats.executed_ops()


def clear_op_tracking() -> None:
    """Clear both records (fallback and executed), like torch_neuronx's."""
    reset_fallback_ops()
    stats.reset_executed_ops()
    _clear()  # executed ops are recorded when an (op, dtypes) is first decided: decide again


def fallback_reasons() -> dict[str, str | None]:
    """``fallback_ops()`` entry -> None (no device implementation) or ``"kernel failed: ..."`` (retried on CPU)."""
    return stats.fallback_reasons()


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
    hw = profiles.load(CONFIG.profile, CONFIG.switches).hardware
    return {
        "name": "neuron",
        "simulated": simulated,
        "profile": CONFIG.profile,
        "profiles": profiles.available(),
        "generation": hw.generation,
        "neuroncore": hw.neuroncore,
        "lnc": CONFIG.lnc,
        "cores": CONFIG.cores,
        "memory_per_core": CONFIG.memory_per_core,
        "cpu_fallback": CONFIG.cpu_fallback,
        "strict": not CONFIG.cpu_fallback,
        "fallback_only_for_unimplemented": CONFIG.fallback_only_for_unimplemented,
        "complex_decompose": CONFIG.complex_decompose,
        **({"cpu_ops": sorted(CONFIG.cpu_ops)} if CONFIG.cpu_ops else {}),  # harness-only (blocker chains)
        "switches": {sw.id: sw.active for sw in profiles.load(CONFIG.profile, CONFIG.switches).switches},
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


def set_strict(strict: bool) -> None:
    """Strict mode (nothing falls back to the CPU) on/off: the same switch as ``set_cpu_fallback(not strict)``."""
    set_cpu_fallback(not strict)


def set_complex_decompose(enabled: bool) -> None:
    """TORCH_NEURONX_COMPLEX_DECOMPOSE in this process: complex ops decomposed (device) or left to the fallback."""
    CONFIG.complex_decompose = bool(enabled)
    _clear()


def set_fallback_only_for_unimplemented(enabled: bool) -> None:
    """TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS in this process: a failing device kernel raises."""
    CONFIG.fallback_only_for_unimplemented = bool(enabled)
    _clear()


def set_profile(name: str) -> None:
    """Select another shipped profile in this process (NEURON_PROFILE sets the start value). The device count stays
    as started; capacity per device, complex decomposition and matmul numerics follow the profile unless their
    environment variables set them."""
    prof = profiles.load(name, CONFIG.switches)  # validates (a switch the new profile lacks fails here)
    CONFIG.profile = name
    config.profile_defaults(CONFIG, prof)
    if not config._env("NEURON_MEMORY_GB"):
        CONFIG.memory_per_core = config.hardware_defaults(prof, CONFIG.lnc)[1]
    _clear()


def switches() -> list[dict[str, Any]]:
    """The active profile's decision switches: id, subject, confidence, the modelled default, the option in force,
    each option with what it says and its sources (URL or repo + path + commit), and how a run measures it."""
    prof = profiles.load(CONFIG.profile, CONFIG.switches)
    return [{"id": sw.id, "subject": sw.subject, "confidence": sw.confidence, "default": sw.default,
             "active": sw.active, "measure": sw.measure, "other_option": sw.other_option, "ops": list(sw.ops), "dtypes": list(sw.dtypes),
             "options": {name: {"says": o["says"], "sources": [prof.sources[k]["ref"] for k in o["sources"]]}
                         for name, o in sw.options.items()}}
            for sw in prof.switches]


def set_switches(chosen: dict[str, str]) -> None:
    """Set the profile's switches in this process (NEURON_SWITCHES sets the start value); an empty dict puts every
    switch back at the profile's default. Unknown switches or options raise ProfileError naming the valid ones."""
    pairs = tuple(sorted(chosen.items()))
    prof = profiles.load(CONFIG.profile, pairs)  # validates
    CONFIG.switches = pairs
    if not config._env("TORCH_NEURONX_COMPLEX_DECOMPOSE"):  # the one setting a switch (complex_eager) moves
        CONFIG.complex_decompose = prof.complex_decompose_default
    _clear()


def set_cpu_ops(names: frozenset[str] | set[str] | list[str]) -> None:
    """NEURON_CPU_OPS in this process (harness-only): these ops run on the CPU fallback whatever the profile says;
    empty puts every op back. The harness's blocker chains use it, never a product fact."""
    CONFIG.cpu_ops = config.parse_cpu_ops(",".join(names))
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
