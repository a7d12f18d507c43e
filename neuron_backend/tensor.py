"""The device tensor: a wrapper subclass whose device is ``neuron:<core>`` and whose data is a CPU tensor.

Autograd runs above it as for any device; every aten op below autograd reaches ``__torch_dispatch__`` (dispatch.py).
"""

from __future__ import annotations

from typing import Any

import torch

from neuron_backend import memory

_make_wrapper = torch.Tensor._make_wrapper_subclass
_DEVICES: list[torch.device] = []


def device_for(core: int) -> torch.device:
    """Cached torch.device objects: building one per op costs more than the op's bookkeeping."""
    while len(_DEVICES) <= core:
        _DEVICES.append(torch.device("neuron", len(_DEVICES)))
    return _DEVICES[core]


class NeuronTensor(torch.Tensor):
    """A tensor on the simulated NeuronCore ``neuron:<core>``; ``_data`` holds its values in host memory."""

    _data: torch.Tensor
    _core: int

    # Plain tensor semantics at the Python level: skipping __torch_function__ saves several microseconds per op.
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, data: torch.Tensor, core: int = 0) -> NeuronTensor:
        r = _make_wrapper(
            cls,
            data.size(),
            strides=data.stride(),
            storage_offset=data.storage_offset(),
            dtype=data.dtype,
            device=device_for(core),
            requires_grad=False,
        )
        r._data = data
        r._core = core
        return r

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: D105
        # Replaced by set_dispatch with the dispatcher itself (one Python frame less per op).
        return _DISPATCH(func, args, kwargs or {})

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        body = repr(self._data)
        return body.replace("tensor(", "tensor(", 1)[:-1] + f", device='neuron:{self._core}')"

    # Traceable-wrapper-subclass protocol: lets Module._apply swap parameters in place (keeping tied weights tied)
    # and lets Dynamo/AOTAutograd see through the wrapper to the ops it runs.
    def __tensor_flatten__(self):
        return ["_data"], self._core

    @staticmethod
    def __tensor_unflatten__(inner_tensors, meta, outer_size, outer_stride):
        return wrap(inner_tensors["_data"], meta)

    def untyped_storage(self) -> torch.UntypedStorage:
        # save_pretrained/safetensors compare storages to find shared tensors: expose the real (host) storage.
        # Not while Dynamo/AOT fakify the wrapper: they memoise storages by identity and need the wrapper's own.
        if torch._guards.TracingContext.try_get() is not None or type(self._data) is not torch.Tensor:
            return super().untyped_storage()
        return self._data.untyped_storage()

    def __reduce_ex__(self, protocol):
        # torch.save / pickle: a device tensor is saved as its host copy (loads as a CPU tensor, like
        # map_location="cpu"), so weights_only=True loading keeps working without allow-listing this class.
        return self._data.detach().__reduce_ex__(protocol)

    def tolist(self) -> Any:
        return _host_sync(self).tolist()

    def numpy(self, *, force: bool = False):
        raise TypeError(
            "can't convert neuron device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
        )


def _unset_dispatch(func, args, kwargs):
    raise RuntimeError("neuron_backend dispatch not initialised")


_DISPATCH = _unset_dispatch


def set_dispatch(fn) -> None:
    """Install the op dispatcher ``fn(func, args, kwargs)`` (dispatch.py); the tensor type holds no policy."""
    global _DISPATCH
    _DISPATCH = fn

    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return fn(func, args, kwargs or _EMPTY)

    NeuronTensor.__torch_dispatch__ = classmethod(__torch_dispatch__)


_EMPTY: dict = {}  # never mutated: dispatch copies kwargs before changing them


def _host_sync(t: NeuronTensor) -> torch.Tensor:
    return t.detach().cpu()


_Tensor = torch.Tensor
_track = memory.track


def wrap(data: torch.Tensor, core: int) -> NeuronTensor:
    """Wrap a host tensor as a device tensor on ``core`` and account its memory (skipped while tracing).

    Builds the wrapper inline rather than through NeuronTensor(...): this runs once per device op.
    """
    r = _make_wrapper(
        NeuronTensor, data.size(), strides=data.stride(), storage_offset=data.storage_offset(), dtype=data.dtype,
        device=_DEVICES[core] if core < len(_DEVICES) else device_for(core), requires_grad=False,
    )
    r._data = data
    r._core = core
    if type(data) is _Tensor and not data.is_meta:
        _track(r, data, core)
    return r
