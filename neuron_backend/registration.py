"""Makes ``neuron`` a PyTorch device via PrivateUse1: backend rename, device module, hooks, the C++ core, methods.

Idempotent; never shadows a real torch-neuronx (then the simulation stays unregistered, its C++ core unloaded, and
SIMULATED is False).
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import sys

import torch

NAME = "neuron"


def _single_threaded_backward() -> None:
    """Run backward in the calling thread (autograd's CPU ready queue) instead of the engine's device threads, as
    before the C++ core: every core's backward runs in the caller, as collectives.py does for each rank. The C++
    guard (csrc/guard.cpp) reports every core, so another thread's backward on any core works as well."""
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
    ours = sys.modules.get("neuron_backend.device_module")
    if current == NAME and getattr(torch, NAME, None) is not None and torch.neuron is not ours:
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
    # Imported only now: loading the C++ core registers its PrivateUse1 kernels, which a real backend owns.
    from neuron_backend import device_module, factories, teardown

    if torch._C._get_privateuse1_backend_name() != NAME:
        torch.utils.rename_privateuse1_backend(NAME)
    torch._register_device_module(NAME, device_module)
    sys.modules.setdefault("torch.neuron", device_module)
    if not hasattr(torch.Tensor, "is_neuron"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=False
        )
    # The device guard and the PrivateUse1 hooks are the C++ core's (csrc/guard.cpp), registered when it loads.
    _single_threaded_backward()
    factories.register()
    _register_pinning()
    _register_shallow_copy()
    _register_serialization()
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


def _compatible_shallow_copy_type(self: torch.Tensor, other: torch.Tensor) -> bool:
    """Host and device tensors are both dense strided tensors: ``param.data = device_tensor`` may swap one for the
    other, as between CPU and CUDA. c10's TensorImpl::has_compatible_shallow_copy_type lists the dense backends CPU,
    CUDA, MPS, HIP, XPU, HPU and MTIA but not PrivateUse1 (c10/core/TensorImpl.h, torch 2.13.0), so without this
    ``Module.to("neuron")`` gives every module a new Parameter and tied weights come apart (Module._apply's
    compute_should_use_set_data asks this op)."""
    dense = (torch.device("cpu").type, NAME)
    return (self.layout == torch.strided and other.layout == torch.strided and self.device.type in dense
            and other.device.type in dense)


def _register_shallow_copy() -> None:
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_has_compatible_shallow_copy_type", _compatible_shallow_copy_type, "AutogradPrivateUse1")
    _libs.append(lib)


def _host_tag(storage) -> str | None:
    return "cpu" if storage.device.type == NAME else None


def _no_restore(obj, location):
    return None  # "cpu" locations are restored by torch's own CPU entry


def _register_serialization() -> None:
    """A device tensor is saved as its host copy and loads on the CPU (as with map_location="cpu" on a real device),
    so weights_only loading needs no device at load time: the same as the wrapper subclass pickled before the C++
    core. torch.save writes a non-CPU storage's bytes from its host copy (torch/serialization.py ``_save``); this
    tagger, ahead of PyTorch's (priority 10 is the CPU's, the PrivateUse1 tag comes later), labels it "cpu"."""
    torch.serialization.register_package(9, _host_tag, _no_restore)


def reason_not_registered() -> str | None:
    return _state["reason"]  # type: ignore[return-value]
