"""PrivateUse1 kernels for the ops that carry only ``device=neuron`` (no device tensor to dispatch on).

Each runs its CPU kernel and adopts the result as device memory; ``empty``/``empty_strided`` are the C++ core's.
"""

from __future__ import annotations

import math

import torch

from neuron_backend import autocast, memory
from neuron_backend.numerics import int64_wrap
from neuron_backend.tensor import _C, wrap
from neuron_backend.tensor import to_host as host

_CPU = torch.device("cpu")

# Composite factories (zeros, full, rand...) reach these through empty + an in-place fill on the device tensor;
# the ones below would otherwise write through an ``out=`` resize that a wrapper's metadata cannot follow.
FACTORY_OPS = (
    "arange",
    "arange.start",
    "arange.start_step",
    "eye",
    "eye.m",
    "range",
    "range.step",
    "linspace",
    "logspace",
    "tril_indices",
    "triu_indices",
    "randperm",
    "randperm.generator",
)

_check_dtype = None  # set by dispatch.py: rejects dtypes the device cannot hold (float64, complex)


_device_module = None  # device_module, imported on first use (it imports this module's users at import time)


def core_of(device: torch.device | str | int | None) -> int:
    # The module is bound once: a function-level ``from ... import`` costs an import-machinery lookup on every
    # factory call. ``_index`` is looked up per call, so it still reads the current device of the moment.
    global _device_module
    if _device_module is None:
        from neuron_backend import device_module

        _device_module = device_module
    return _device_module._index(device)


def _nbytes_strided(size, stride, dtype: torch.dtype) -> int:
    if any(s == 0 for s in size):
        return 0
    span = 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))
    return span * dtype.itemsize  # the element size without allocating a 0-d tensor to ask it (same value)


def _make_kernel(op: torch._ops.OpOverload):
    name = op._schema.name.removeprefix("aten::")

    # Resolved once per kernel, not per call (the op identity tests below run on every factory call).
    is_empty = op is torch.ops.aten.empty.memory_format
    is_empty_strided = op is torch.ops.aten.empty_strided.default
    uninitialised = is_empty or is_empty_strided

    def kernel(*args, **kwargs):
        core = core_of(kwargs.get("device"))
        kwargs["device"] = _CPU
        dtype = kwargs.get("dtype")
        if _check_dtype is not None and dtype is not None:
            _check_dtype(name, dtype)
        if is_empty:
            numel = math.prod(args[0])
            # dtype.itemsize: the same element size, without allocating a 0-d tensor per factory call (~2 us)
            itemsize = (dtype or torch.get_default_dtype()).itemsize
            memory.check_fits(numel * itemsize, core)
        elif is_empty_strided:
            memory.check_fits(_nbytes_strided(args[0], args[1], dtype or torch.get_default_dtype()), core)
        out = op(*args, **kwargs)
        if autocast.casts_int64():
            result = wrap(out, core)
            if not uninitialised:  # an empty tensor's garbage is overwritten before any op reads it
                autocast.note_entry(result)
            return result
        return wrap(int64_wrap(out), core)

    return kernel


def _copy_from(self: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    from_device = self.device.type == "neuron"
    src = host(self) if from_device else self
    if dst.device.type == "neuron":
        if not from_device and not autocast.casts_int64():
            src = int64_wrap(src)  # a profile without int64 autocast stores int64 values as int32
        host(dst).copy_(src)
        _C.touch(dst)  # written outside an op the C++ kernel sees (its bf16 operand cache checks this)
        if not from_device:
            autocast.note_entry(dst)  # host int64 values outside int32 are wrapped when an op reads them
    else:
        dst.copy_(src)
    return dst


def _copy_from_and_resize(self: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    return _copy_from(self, dst)


_LIB: torch.library.Library | None = None


def register() -> None:
    """Register the factory kernels for the PrivateUse1 key (once per process)."""
    global _LIB
    if _LIB is not None:
        return
    lib = torch.library.Library("aten", "IMPL")
    for name in FACTORY_OPS:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet), overload or "default")
        lib.impl(name, _make_kernel(op), "PrivateUse1")
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    lib.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
    _LIB = lib
