"""Device tensors are plain ``torch.Tensor``s on PrivateUse1 whose memory the C++ core (csrc/allocator.cpp) allocates.

Python code reaches their memory through a host alias (``host``: a CPU tensor over the same bytes, no copy) and
turns a host result into a device tensor with ``wrap`` (the host storage adopted as device memory, no copy).
"""

from __future__ import annotations

import torch

from neuron_backend import core

_C = core.load()
_Tensor = torch.Tensor
_DEVICES: list[torch.device] = []

host = _C.host  # host(t): a CPU tensor aliasing device tensor t (same storage bytes, sizes, strides, offset)
sync = _C.sync  # sync(d, h): give device tensor d the metadata (and storage, if resized) of its host alias h
is_alias = _C.is_alias


def device_for(core_index: int) -> torch.device:
    """Cached torch.device objects (one per core)."""
    while len(_DEVICES) <= core_index:
        _DEVICES.append(torch.device("neuron", len(_DEVICES)))
    return _DEVICES[core_index]


def is_device(t: object) -> bool:
    """Whether ``t`` is a tensor on the neuron device."""
    return isinstance(t, _Tensor) and t.device.type == "neuron"


def wrap(data: torch.Tensor, core_index: int) -> torch.Tensor:
    """A host tensor as a device tensor on ``core_index``: a view of the device memory it aliases, else its storage
    adopted as device memory (accounted by the allocator); never a copy. A fake host tensor (Dynamo tracing an op
    without a meta kernel, see ``to_host``) becomes a fake device tensor."""
    if _C.is_host(data):
        return _C.adopt(data, core_index)
    return data.to(device_for(core_index))


def to_host(t: torch.Tensor) -> torch.Tensor:
    """The host view of a device tensor's memory (``host``); for a fake device tensor (FakeTensorMode runs an op
    without a meta kernel through the device's kernel) its fake host copy, a traced op as before the C++ core."""
    if _C.is_device(t):
        return _C.host(t)
    return t.to("cpu")
