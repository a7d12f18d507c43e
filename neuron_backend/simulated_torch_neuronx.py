"""A ``torch_neuronx`` module for the simulated device, so libraries that look for TorchNeuron find it.

Installed into ``sys.modules`` only while the simulation is the registered ``neuron`` device (never when a real
torch-neuronx is installed: registration.real_neuron_present decides that first); it is never a file on sys.path.
"""

from __future__ import annotations

import importlib.machinery
import sys
from types import ModuleType

from neuron_backend import api, device_module

NAME = "torch_neuronx"
ORIGIN = "neuron_backend (simulated device)"

# The names of the real package's top level that callers reach (torch_neuronx/__init__.py in
# parmoham-aws/test-repo-parmoham @ 67d8dc4a52b14ff2d6e5023ba8487b41271e982e, pre-release source, INDICATIVE):
# device selection and properties, streams, memory statistics, and op tracking (get_fallback_ops ...). Hugging Face's
# libraries only ask that the module be importable (transformers 5.23.0 utils/import_utils.py:614
# ``find_spec("torch_neuronx")``, accelerate 1.15.0 utils/imports.py:466) and then use ``torch.neuron``. Names
# whose real behaviour is not known here (get_dynamo_metrics, memory_stats, nki_op, ...) are left out, not guessed.
_FROM_DEVICE_MODULE = (
    "device_count", "current_device", "set_device", "get_device_properties", "empty_cache", "synchronize",
    "current_stream", "default_stream", "set_stream", "stream", "device", "Stream", "Event", "StreamContext",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
)
_FROM_API = ("get_fallback_ops", "get_executed_ops", "clear_op_tracking")


def _autoload() -> None:
    """The real package's ``torch.backends`` entry point name (a no-op here: the module exists once registered)."""


def is_neuron_runtime_initialized() -> bool:
    return True


def build() -> ModuleType:
    """The module object: the names above, ``neuron`` (the device module, as the real ``torch_neuronx.neuron``),
    ``SIMULATED = True`` (how the harness tells it from a real install) and a spec, so ``importlib.util.find_spec``
    answers from ``sys.modules`` (it raises ValueError for a module whose ``__spec__`` is None)."""
    mod = ModuleType(NAME, __doc__)
    mod.__spec__ = importlib.machinery.ModuleSpec(NAME, None, origin=ORIGIN)
    mod.__version__ = f"{api.BACKEND_VERSION}+simulated"
    mod.SIMULATED = True
    mod.neuron = device_module
    mod._autoload = _autoload
    mod.is_neuron_runtime_initialized = is_neuron_runtime_initialized
    for name in _FROM_DEVICE_MODULE:
        setattr(mod, name, getattr(device_module, name))
    for name in _FROM_API:
        setattr(mod, name, getattr(api, name))
    return mod


def install() -> ModuleType:
    """Put the module in ``sys.modules`` (idempotent; a module already there that is not ours is left alone)."""
    current = sys.modules.get(NAME)
    if current is not None and getattr(current, "SIMULATED", False):
        return current
    if current is not None:
        raise RuntimeError(f"a real {NAME} is already imported: the simulation must not be registered")
    mod = sys.modules[NAME] = build()
    return mod


def is_simulated(module: ModuleType | None) -> bool:
    """Whether ``module`` (e.g. ``sys.modules.get("torch_neuronx")``) is this simulation's, not a real install."""
    return bool(module is not None and getattr(module, "SIMULATED", False))
