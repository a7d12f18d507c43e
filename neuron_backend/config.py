"""Device settings of the simulated NeuronCore device, read from ``NEURON_*`` environment variables here only.

Every knob has a documented default; the rest of the package reads ``CONFIG`` and never the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

GIB = 1 << 30

# name -> (default, meaning); the table is the documentation (also rendered in docs/ARCHITECTURE.md).
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "NEURON_CORES": ("2", "number of NeuronCores, i.e. devices neuron:0 .. neuron:N-1"),
    "NEURON_MEMORY_GB": ("16", "device (HBM) memory per NeuronCore, GiB; exceeding it raises torch.OutOfMemoryError"),
    "NEURON_PROFILE": ("trn2", "op table: trn2 (default), trn3 or legacy-xla (see neuron_backend/profiles/)"),
    "NEURON_CPU_FALLBACK": ("1", "1 = run unsupported ops on the CPU with one warning per op, recorded by fallback_ops(); 0 = strict"),
    "NEURON_AUTOCAST_MATMUL": ("1", "1 = compiler-style bf16 matmul numerics (bf16 inputs, fp32 accumulate); 0 = exact fp32"),
}


def _env(name: str) -> str:
    return os.environ.get(name, ENVIRONMENT[name][0]).strip()


def _flag(name: str) -> bool:
    value = _env(name).lower()
    if value not in {"0", "1", "true", "false", "yes", "no", "on", "off", ""}:
        raise ValueError(f"{name}={value!r}: expected 0 or 1")
    return value in {"1", "true", "yes", "on"}


@dataclass
class Config:
    """The device's settings; mutable so tests and the harness can switch numerics or fallback in-process."""

    cores: int
    memory_per_core: int  # bytes
    profile: str
    cpu_fallback: bool
    autocast_matmul: bool


def load() -> Config:
    """Read the environment once; invalid values fail loudly rather than silently picking a default."""
    cores = int(_env("NEURON_CORES"))
    if not 1 <= cores <= 128:
        raise ValueError(f"NEURON_CORES={cores}: expected 1..128")
    memory_gb = float(_env("NEURON_MEMORY_GB"))
    if memory_gb <= 0:
        raise ValueError(f"NEURON_MEMORY_GB={memory_gb}: must be positive")
    return Config(
        cores=cores,
        memory_per_core=int(memory_gb * GIB),
        profile=_env("NEURON_PROFILE"),
        cpu_fallback=_flag("NEURON_CPU_FALLBACK"),
        autocast_matmul=_flag("NEURON_AUTOCAST_MATMUL"),
    )


CONFIG = load()
