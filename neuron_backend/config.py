"""Device settings of the simulated NeuronCore device, read from the environment here only.

Every knob has a documented default (some come from the active profile); the rest of the package reads ``CONFIG``.
The real torch-neuronx variable names are honoured beside ours (sources in ``ENVIRONMENT``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from neuron_backend.hardware import profiles

GIB = 1 << 30
_ENV_VARS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html (2026-10-14)"
_SRC_DOC = ("docs/environment_variables.md in parmoham-aws/test-repo-parmoham @ 98154b867aa24562a3213e520d9ad7fd41032291"
            " (pre-beta torch-neuronx source, INDICATIVE)")

# name -> (default, meaning); the table is the documentation (also rendered in docs/ARCHITECTURE.md). An empty
# default means "from the active profile".
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "NEURON_PROFILE": ("trn2", "op table and hardware: trn2 (default), trn3, ... (see neuron_backend/hardware/profiles/)"),
    "NEURON_SWITCHES": ("", "the profile's decision switches set to another option, ID=OPTION[,ID=OPTION] (e.g. "
                            "grouped_mm_preconditions=not_enforced); default: every switch at the profile's default "
                            "(neuron_backend.switches() lists them with their sources)"),
    "NEURON_LOGICAL_NC_CONFIG": (
        "", "Logical NeuronCore (LNC) degree, physical cores per logical core (1 or 2; default: the profile's, "
            "2 on Trn2/Trn3). Real runtime variable: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/"
            "general/arch/neuron-features/logical-neuroncore-config.html"),
    "NEURON_CORES": ("", "number of devices neuron:0..N-1 (default: logical NeuronCores of one chip = cores/LNC)"),
    "NEURON_MEMORY_GB": ("", "device memory per logical NeuronCore, GiB (default: HBM per chip / logical cores); "
                             "exceeding it raises torch.OutOfMemoryError"),
    "NEURON_CPU_FALLBACK": ("1", "1 (default, the vendor's semantics) = ops without a device implementation run on the "
                                 "CPU, one warning per op, recorded by fallback_ops(); 0 = strict: nothing falls back "
                                 "(measures native coverage)"),
    "NEURON_STRICT": ("0", "1 = strict mode, same as NEURON_CPU_FALLBACK=0"),
    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": (
        "0", f"1 = a device kernel that fails at execution raises instead of being retried on the CPU ({_SRC_DOC}); "
             "default 0 as in the source's RELEASE build (torch_neuronx/_build_config.py: RELEASE '0', DEV '1')"),
    "TORCH_NEURONX_COMPLEX_DECOMPOSE": (
        "", f"complex ops decomposed by the framework (default: the profile's; True for PyTorch >= 2.13 per {_ENV_VARS})"),
    "TORCH_NEURONX_SKIP_OP_PRECONDITIONS": (
        "0", f"1 = skip the Neuron kernels' input preconditions, e.g. _grouped_mm's 128-alignment of offs "
             f"(torch_neuronx/utils.py skip_op_preconditions, {_SRC_DOC})"),
    "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": (
        "1", f"torch.compile only: 1 = a graph that fails to compile raises; 0 = runs eagerly instead ({_ENV_VARS})"),
    "NEURON_CPU_OPS": ("", "harness-only, not a product setting: ops moved to the CPU fallback whatever the profile "
                           "says, comma-separated names (e.g. aten::sort,aten::_grouped_mm), also in strict mode. The "
                           "harness measures blocker chains with it (what fails once an op is implemented); no "
                           "torch-neuronx setting that does this is known, so a real device cannot be asked"),
    "NEURON_AUTOCAST_MATMUL": ("", "1 = compiler-style bf16 matmul numerics (bf16 inputs, fp32 accumulate); 0 = exact "
                                   "fp32 (default: the profile's matmul_autocast)"),
}
_FLAGS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _env(name: str) -> str:
    return os.environ.get(name, ENVIRONMENT[name][0]).strip()


def _flag(name: str, default: bool | None = None) -> bool:
    value = _env(name).lower()
    if value == "" and default is not None:
        return default
    if value not in _FLAGS:
        raise ValueError(f"{name}={value!r}: expected 0 or 1")
    return _FLAGS[value]


@dataclass
class Config:
    """The device's settings; mutable so tests and the harness can switch numerics or fallback in-process."""

    profile: str
    switches: tuple[tuple[str, str], ...]  # (switch id, option) pairs set away from the profile's defaults
    lnc: int  # physical NeuronCores per logical NeuronCore (device)
    cores: int  # devices neuron:0..cores-1
    memory_per_core: int  # bytes per device
    cpu_fallback: bool  # False = strict
    fallback_only_for_unimplemented: bool
    complex_decompose: bool
    disable_fallback_execution: bool
    skip_op_preconditions: bool
    autocast_matmul: bool
    cpu_ops: frozenset[str] = frozenset()  # NEURON_CPU_OPS: harness-only, ops forced onto the CPU fallback

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if name in ("cores", "memory_per_core") and "cores" in self.__dict__ and "memory_per_core" in self.__dict__:
            for fn in _LISTENERS:
                fn(self)


# Called with the Config whenever its device count or capacity changes (memory.py: the C++ allocator's limits).
_LISTENERS: list = []


def on_hardware_change(fn) -> None:
    """Call ``fn(config)`` whenever ``cores`` or ``memory_per_core`` is set."""
    _LISTENERS.append(fn)


def hardware_defaults(profile: profiles.Profile, lnc: int) -> tuple[int, int]:
    """(devices, bytes per device) of one chip of ``profile`` grouped ``lnc`` physical cores per logical core."""
    hw = profile.hardware
    if lnc < 1 or hw.cores_per_chip % lnc:
        raise ValueError(f"NEURON_LOGICAL_NC_CONFIG={lnc}: {hw.generation} has {hw.cores_per_chip} NeuronCores per chip"
                         "; the LNC degree must divide it (1 or 2)")
    logical = hw.cores_per_chip // lnc
    return logical, hw.hbm_per_chip_bytes // logical


def profile_defaults(cfg: Config, profile: profiles.Profile) -> None:
    """Set the settings whose default is the profile's, unless their environment variable sets them."""
    if _env("TORCH_NEURONX_COMPLEX_DECOMPOSE") == "":
        cfg.complex_decompose = profile.complex_decompose_default
    if _env("NEURON_AUTOCAST_MATMUL") == "":
        cfg.autocast_matmul = profile.matmul_autocast == "bf16"


def parse_cpu_ops(text: str) -> frozenset[str]:
    """``aten::sort, aten::_grouped_mm`` -> the op names; a name without a namespace fails naming the variable."""
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    bad = sorted(n for n in names if "::" not in n or " " in n)
    if bad:
        raise ValueError(f"NEURON_CPU_OPS: {', '.join(bad)}: expected op names such as aten::sort, comma-separated")
    return names


def load() -> Config:
    """Read the environment once; invalid values fail loudly rather than silently picking a default."""
    name = _env("NEURON_PROFILE")
    switches = profiles.parse_switches(_env("NEURON_SWITCHES"))
    profile = profiles.load(name, switches)  # unknown names or switches fail here with the list of valid ones
    lnc_text = _env("NEURON_LOGICAL_NC_CONFIG")
    lnc = int(lnc_text) if lnc_text else profile.hardware.lnc_default
    cores, per_core = hardware_defaults(profile, lnc)
    if _env("NEURON_CORES"):
        cores = int(_env("NEURON_CORES"))
        if not 1 <= cores <= 128:
            raise ValueError(f"NEURON_CORES={cores}: expected 1..128")
    if _env("NEURON_MEMORY_GB"):
        memory_gb = float(_env("NEURON_MEMORY_GB"))
        if memory_gb <= 0:
            raise ValueError(f"NEURON_MEMORY_GB={memory_gb}: must be positive")
        per_core = int(memory_gb * GIB)
    cfg = Config(
        profile=name,
        switches=switches,
        lnc=lnc,
        cores=cores,
        memory_per_core=per_core,
        cpu_fallback=_flag("NEURON_CPU_FALLBACK") and not _flag("NEURON_STRICT"),
        fallback_only_for_unimplemented=_flag("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"),
        complex_decompose=_flag("TORCH_NEURONX_COMPLEX_DECOMPOSE", True),
        disable_fallback_execution=_flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"),
        skip_op_preconditions=_flag("TORCH_NEURONX_SKIP_OP_PRECONDITIONS"),
        autocast_matmul=_flag("NEURON_AUTOCAST_MATMUL", True),
        cpu_ops=parse_cpu_ops(_env("NEURON_CPU_OPS")),
    )
    profile_defaults(cfg, profile)
    return cfg


CONFIG = load()
