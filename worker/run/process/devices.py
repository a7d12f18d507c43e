"""Device resolution: a user's device string -> a checked torch device with its identity, numerics policy and hooks.

``neuron`` is a real torch-neuronx install when importable (it takes precedence), else the bundled simulation. A
device name is resolved once per process, at its edge (``resolve_device`` in the CLI or a plan, ``process_device`` where
a name arrives from another process); inside a process only ``Device`` objects travel.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Any

import psutil
import torch
import transformers

from compat.results import DeviceInfo
from worker.judge.attribution import format_op
from worker.run.process.device_names import DEVICE_RE, KNOWN_DEVICES, normalize


class DeviceError(ValueError):
    """Unknown or unavailable device; the message is one line naming the valid choices."""


@dataclass
class Device:
    """A resolved device under test."""

    name: str  # what the user asked for: "neuron", "cpu", "cuda:1"
    torch_device: str  # what tensors are moved to
    info: DeviceInfo
    policy: str = "fp32"  # numerics policy: "fp32" or "bf16_matmul"
    compile_backend: str = "inductor"
    backend: ModuleType | None = field(default=None, repr=False)  # module with fallback_ops()/reset_fallback_ops()

    def reset_fallback(self) -> None:
        if self.backend is not None and hasattr(self.backend, "reset_fallback_ops"):
            self.backend.reset_fallback_ops()

    def fallback_ops(self) -> list[str]:
        if self.backend is None or not hasattr(self.backend, "fallback_ops"):
            return []
        out: list[str] = []
        for op in self.backend.fallback_ops():
            text = op if isinstance(op, str) and "(" in op else format_op(op)
            if text not in out:
                out.append(text)
        return out

    def reset_peak_memory(self) -> None:
        mod = getattr(torch, self.info.name.split(":")[0], None)
        if mod is not None and hasattr(mod, "reset_peak_memory_stats") and self.info.name != "cpu":
            try:
                mod.reset_peak_memory_stats()
            except Exception:  # noqa: BLE001 - a device without memory stats: fall back to RSS
                pass

    def peak_memory_mb(self) -> float:
        """Device peak allocation where the device reports it, else this process's resident set (CPU-backed)."""
        mod = getattr(torch, self.info.name.split(":")[0], None)
        if mod is not None and hasattr(mod, "max_memory_allocated") and self.info.name != "cpu":
            try:
                return float(mod.max_memory_allocated()) / 2**20
            except Exception:  # noqa: BLE001
                pass
        return psutil.Process().memory_info().rss / 2**20

    def synchronize(self) -> None:
        mod = getattr(torch, self.torch_device.split(":")[0], None)
        if mod is not None and hasattr(mod, "synchronize") and self.torch_device != "cpu":
            try:
                mod.synchronize()
            except Exception:  # noqa: BLE001 - not every backend implements synchronize
                pass


def _jsonable(obj: Any) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(obj, default=str)) if isinstance(obj, dict) else {"info": str(obj)}
    except (TypeError, ValueError):
        return {"info": str(obj)}


def invalid(name: str, why: str = "unknown device") -> DeviceError:
    return DeviceError(f"{why} {name!r}; valid devices: {', '.join(KNOWN_DEVICES)} (optionally with :INDEX)")


def _real_neuron() -> Device | None:
    if importlib.util.find_spec("torch_neuronx") is None:
        return None
    mod = importlib.import_module("torch_neuronx")
    if getattr(mod, "SIMULATED", False):  # the simulation's stand-in (neuron_backend/simulated_torch_neuronx.py)
        return None
    # The native TorchNeuron backend registers "neuron"; the XLA-based torch-neuronx uses the "xla" device.
    native = torch._C._get_privateuse1_backend_name() == "neuron"
    tdev = "neuron" if native else "xla"
    info = DeviceInfo(name="neuron", simulated=False, description=f"torch-neuronx ({tdev} device)",
                      torch_version=torch.__version__, backend_version=str(getattr(mod, "__version__", "")))
    return Device("neuron", tdev, info, "fp32", "neuron" if native else "openxla", mod)


def _simulated_neuron() -> Device:
    # Imported by name, only here: importing it registers the simulated device, which must not happen when a real
    # torch-neuronx is installed.
    nb = importlib.import_module("neuron_backend")
    details = _jsonable(nb.device_info())
    policy = nb.numerics_policy()
    desc = "bundled simulation"
    if details.get("profile"):
        desc += f", profile {details['profile']}"
    info = DeviceInfo(name="neuron", simulated=True, description=desc, torch_version=torch.__version__,
                      backend_version=str(getattr(nb, "__version__", "")), details=details)
    return Device("neuron", "neuron", info, str(policy), "neuron", nb)


def resolve_device(name: str) -> Device:
    """Check ``name`` and return the device; raises DeviceError (one line, valid choices) when it cannot be used."""
    m = DEVICE_RE.match(normalize(name)) if name else None
    if not m:
        raise invalid(name)
    dtype_, index = m.group("type"), m.group("index")
    if dtype_ == "neuron":
        return _real_neuron() or _simulated_neuron()
    if dtype_ == "cpu":
        info = DeviceInfo(name="cpu", simulated=False, description=f"CPU ({psutil.cpu_count()} logical cores)",
                          torch_version=torch.__version__, backend_version=torch.__version__)
        return Device("cpu", "cpu", info, "fp32", "inductor")
    if dtype_ not in KNOWN_DEVICES:
        raise invalid(name)
    mod = getattr(torch, dtype_, None)
    if mod is None or not hasattr(mod, "is_available") or not mod.is_available():
        raise invalid(name, "device not available on this machine:")
    if index is not None and hasattr(mod, "device_count") and int(index) >= mod.device_count():
        raise invalid(name, "no such device index:")
    desc = dtype_
    if hasattr(mod, "get_device_name"):
        try:
            desc = mod.get_device_name(int(index or 0))
        except Exception:  # noqa: BLE001 - a name is cosmetic
            pass
    backend_version = str(getattr(torch.version, dtype_, None) or "")
    info = DeviceInfo(name=name, simulated=False, description=desc, torch_version=torch.__version__,
                      backend_version=backend_version)
    return Device(name, name, info, "fp32", "inductor" if dtype_ in {"cuda", "xpu"} else "aot_eager")


@cache
def process_device(name: str) -> Device:
    """The device ``name`` for this process, resolved once: a pool worker or a Celery pool process receives the
    name with each architecture and serves many of them on the same device."""
    return resolve_device(name)


def device_versions(device: Device) -> dict[str, str]:
    """Versions recorded with a run."""
    out = {"torch": torch.__version__, "transformers": transformers.__version__}
    if device.info.backend_version:
        out[f"{device.info.name.split(':')[0]}_backend"] = device.info.backend_version
    try:
        out["neuron_compat"] = version("neuron-compat")
    except PackageNotFoundError:  # not installed as a distribution (source checkout)
        pass
    return out
