"""Makes ``neuron`` a PyTorch device via PrivateUse1: backend rename, device module, hooks, device guard, methods.

Idempotent; never shadows a real torch-neuronx (then the simulation stays unregistered and SIMULATED is False).
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import sys

import torch

from neuron_backend import device_module, factories, teardown

NAME = "neuron"


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    """What PyTorch asks a C++ backend (is it built/available, does a core have a context)."""

    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):
    """Device guard: without one, autograd's engine and ``.to()`` cannot switch to a PrivateUse1 device.

    Only ``type_`` can be answered from Python. torch's ``PythonDeviceGuard`` (torch/csrc/acc/Module.cpp in
    pytorch/pytorch @ 09a38b634eb32f57e736678d5d1e40ca662d7303, same in @ e450649e652006591a919877379455c66385d4f9)
    binds ``type_`` alone and answers the rest in C++: ``deviceCount()`` returns 1, ``getDevice()`` /
    ``exchangeDevice()`` index 0, ``setDevice`` / ``uncheckedSetDevice`` do nothing. Python methods named for them
    (device_count, current_device, set_device, deviceCount, ...) are never called (checked on the installed torch
    2.13.0, git cf30153c4c131c8164ee7798e5022d810682e2cb). So the autograd engine starts one device thread and
    queue, and backward on ``neuron:N``, N > 0, fails its ``device_ready_queues_`` assert: register() turns autograd
    multithreading off for that reason (``_single_threaded_backward``). ``type_`` is also called from ``noexcept``
    paths (exchangeStream; deferred.py): it must never raise.
    """

    def type_(self):
        return torch._C._autograd.DeviceType.PrivateUse1


def _single_threaded_backward() -> None:
    """Run backward in the calling thread (autograd's CPU ready queue) instead of the engine's device threads.

    The engine routes a node on ``neuron:N`` to device queue N unless multithreading is off for the calling thread
    (torch/csrc/autograd/engine.cpp, ``Engine::ready_queue``), and it has one device queue (see _Guard). Off, every
    core's backward runs in the caller, as collectives.py already does for each rank; gradients are the same and land
    on their core. The setting is per thread: this covers the thread that imports neuron_backend (where training
    runs); another thread that calls backward on ``neuron:N``, N > 0, needs
    ``torch.autograd.set_multithreading_enabled(False)`` itself.
    """
    torch.autograd.set_multithreading_enabled(False)


REAL_DISTRIBUTION = "torch-neuronx"


def real_torch_neuronx() -> str | None:
    """Where a real torch-neuronx is, else None: an installed distribution (its dist-info), a ``torch_neuronx``
    package on sys.path, or one already imported. ``importlib.util.find_spec`` is not asked: it answers from
    ``sys.modules``, where the simulation's own module (simulated_torch_neuronx) stands once registered."""
    try:
        dist = importlib.metadata.distribution(REAL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        return f"{REAL_DISTRIBUTION} {dist.version} is installed"
    if importlib.machinery.PathFinder.find_spec("torch_neuronx") is not None:
        return "a torch_neuronx package is on sys.path"
    mod = sys.modules.get("torch_neuronx")
    if mod is not None and not getattr(mod, "SIMULATED", False):
        return "a torch_neuronx module is imported"
    return None


def real_neuron_present() -> str | None:
    """Why the simulation must stand aside (a real torch-neuronx, or PrivateUse1 already taken), else None."""
    if (where := real_torch_neuronx()) is not None:
        return f"{where}: the real Neuron device owns the name 'neuron'"
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", NAME):
        return f"PrivateUse1 is already registered as '{current}'"
    if current == NAME and getattr(torch, NAME, None) is not None and torch.neuron is not device_module:
        return "another package already registered the 'neuron' device module"
    return None


_state: dict[str, object] = {"registered": False, "reason": None}


def register() -> bool:
    """Register the simulated device; returns whether the simulation is the active ``neuron`` device."""
    if _state["registered"]:
        return True
    reason = real_neuron_present()
    if reason is not None:
        _state["reason"] = reason
        return False
    if torch._C._get_privateuse1_backend_name() != NAME:
        torch.utils.rename_privateuse1_backend(NAME)
    torch._register_device_module(NAME, device_module)
    sys.modules.setdefault("torch.neuron", device_module)
    if not hasattr(torch.Tensor, "is_neuron"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=False
        )
    torch._C._acc.register_python_privateuseone_hook(_Hooks())
    torch._C._acc.register_python_privateuseone_device_guard(_Guard())
    _single_threaded_backward()
    factories.register()
    _register_pinning()
    teardown.register()
    _state["registered"] = True
    return True


_PIN_OP = torch.ops.aten._pin_memory.default
_COMPOSITE = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
_libs: list = []  # keeps the IMPL library alive


def _pin_memory(self: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
    """Pinned host memory for the neuron device. The real backend pins through its host allocator
    (NeuronHooksInterface.h:26-37 getPinnedMemoryAllocator / isPinnedPtr at parmoham-aws/test-repo-parmoham@
    98154b867aa24562a3213e520d9ad7fd41032291, pre-beta, INDICATIVE), so Trainer's default pinned data loader works.
    PyTorch's Python PrivateUse1 hooks cannot supply an allocator, so the simulation returns an ordinary host copy:
    pinning is a transfer-speed feature, the values are the same. Other devices keep PyTorch's own kernel."""
    target = torch.device(device) if device is not None else torch.accelerator.current_accelerator()
    if target is not None and target.type == NAME:
        return self.clone()
    return _PIN_OP.redispatch(_COMPOSITE, self, device)


def _register_pinning() -> None:
    lib = torch.library.Library("aten", "IMPL")  # a CPU kernel in front of the composite one
    lib.impl("_pin_memory", _pin_memory, "CPU")
    _libs.append(lib)


def reason_not_registered() -> str | None:
    return _state["reason"]  # type: ignore[return-value]
