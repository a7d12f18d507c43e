"""Device transfers and host reads for dispatch.py: ``_to_copy``, ``copy_`` and ``_local_scalar_dense`` on device tensors.

Host int64 values entering the device are recorded for autocast.py (they may lie outside int32).
"""

from __future__ import annotations

import torch

from neuron_backend import autocast, numerics, policy, stats
from neuron_backend.tensor import NeuronTensor, wrap

_CPU = torch.device("cpu")


def to_copy(func, args, kwargs):
    """``aten::_to_copy`` on a device tensor: to the host, or a device-side conversion (checked dtype)."""
    src = args[0]
    device = kwargs.get("device")
    dtype = kwargs.get("dtype") or src.dtype
    inner_kwargs = dict(kwargs)
    if device is not None and torch.device(device).type != "neuron":
        return func(src._data, **inner_kwargs)  # device -> host
    policy.check_device_dtype("aten::_to_copy", dtype, src)
    core = src._core if device is None or torch.device(device).index is None else torch.device(device).index
    inner_kwargs["device"] = _CPU
    out = func(src._data, **inner_kwargs)
    if out.dtype is torch.int64 and src.dtype is not torch.int64:
        autocast.note_entry(out)  # a conversion (float -> int64) can produce values outside int32
    return wrap(out, core)


def copy_(func, args, kwargs):
    """``aten::copy_`` with a device tensor on either side: device<->device, host->device, device->host."""
    dst, src = args[0], args[1]
    if type(dst) is NeuronTensor:
        if type(src) is NeuronTensor:
            dst._data.copy_(src._data)
        else:  # host -> device
            data = src
            if dst.dtype == torch.int64 and src.dtype == torch.int64 and not autocast.casts_int64():
                data = numerics.int64_wrap(src)  # a profile without int64 autocast stores int64 as int32
            dst._data.copy_(data)
            autocast.note_entry(dst._data)
        return dst
    dst.copy_(src._data)  # device -> host
    return dst


def local_scalar_dense(func, args, kwargs):
    """``.item()``: a counted device-to-host value read."""
    stats.record_host_sync()
    return func(args[0]._data)
