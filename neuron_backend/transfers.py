"""Device transfers and host reads for dispatch.py: ``_to_copy``, ``copy_`` and ``_local_scalar_dense`` on device tensors.

Host int64 values entering the device are recorded for autocast.py (they may lie outside int32).
"""

from __future__ import annotations

import torch

from neuron_backend import autocast, errors, numerics, policy, stats
from neuron_backend.tensor import _C, wrap
from neuron_backend.tensor import to_host as host

_CPU = torch.device("cpu")
stats.add_host_sync_source(_C.host_syncs)  # .item() reads the C++ kernel serves without Python
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def to_copy(func, args, kwargs):
    """``aten::_to_copy`` on a device tensor: to the host, or a device-side conversion (checked dtype)."""
    src = args[0]
    if src.device.type != "neuron":
        # host -> device: the op's composite kernel (the CPU's entry), which allocates on the device and copies
        # through copy_ below, as it ran before the C++ core registered itself for _to_copy
        return func.redispatch(_CPU_KEYS, *args, **kwargs)
    device = kwargs.get("device")
    dtype = kwargs.get("dtype") or src.dtype
    inner_kwargs = dict(kwargs)
    if device is not None and torch.device(device).type != "neuron":
        out = func(host(src), **inner_kwargs)  # device -> host: a copy, never the device memory itself
        return out.clone() if _shares(out, src) else out
    policy.check_device_dtype("aten::_to_copy", dtype, src)
    core = src.device.index if device is None or torch.device(device).index is None else torch.device(device).index
    inner_kwargs["device"] = _CPU
    out = func(host(src), **inner_kwargs)
    if core != src.device.index or _shares(out, src):
        out = out.clone()  # another core's memory, or a fresh copy: never an alias of the source's memory
    result = wrap(out, core)
    if out.dtype is torch.int64 and src.dtype is not torch.int64:
        autocast.note_entry(result)  # a conversion (float -> int64) can produce values outside int32
    return result


def fast_to_copy(dtypes: list) -> tuple[int, tuple[int, ...]] | None:
    """The C++ kernel may run ``_to_copy`` of a device tensor itself (kind 4) unless the conversion needs Python: a
    dtype the device rejects (the typed error), or an int64 result of a non-int64 source (autocast.note_entry)."""
    src = dtypes[0]
    dtype = dtypes[-1] if len(dtypes) > 1 else src
    try:
        policy.check_device_dtype("aten::_to_copy", dtype)
    except errors.NeuronUnsupportedOpError:
        return None
    if dtype is torch.int64 and src is not torch.int64:
        return None
    return 4, ()


def _shares(out: torch.Tensor, src: torch.Tensor) -> bool:
    return out.untyped_storage().data_ptr() == src.untyped_storage().data_ptr() and out.numel() > 0


def copy_(func, args, kwargs):
    """``aten::copy_`` with a device tensor on either side: device<->device, host->device, device->host."""
    dst, src = args[0], args[1]
    non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
    if dst.device.type == "neuron":
        if src.device.type == "neuron":
            host(dst).copy_(host(src), non_blocking)
        else:  # host -> device
            data = src
            if dst.dtype == torch.int64 and src.dtype == torch.int64 and not autocast.casts_int64():
                data = numerics.int64_wrap(src)  # a profile without int64 autocast stores int64 as int32
            host(dst).copy_(data, non_blocking)
            autocast.note_entry(dst)
        return dst
    dst.copy_(host(src), non_blocking)  # device -> host
    return dst


def local_scalar_dense(func, args, kwargs):
    """``.item()``: a counted device-to-host value read."""
    stats.record_host_sync()
    return func(host(args[0]))
