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
    def __new__(cls, data: torch.Tensor, core: int | None = None, *, requires_grad: bool | None = None):
        """``NeuronTensor(host_data, core)`` wraps host data (the device's own use).

        ``NeuronTensor(value, requires_grad=...)`` is the Parameter-class protocol: ``type(param)`` of a device
        parameter is this class (Parameter of a tensor subclass keeps the subclass, as DTensor does), and Accelerate's
        ``set_module_tensor_to_device`` rebuilds a parameter as ``type(param)(value, requires_grad=...)``. A device
        ``value`` then gives a device parameter sharing its data; a host or meta ``value`` (offload) gives a
        ``torch.nn.Parameter`` there, exactly what ``Parameter(value, requires_grad)`` gives on a real device.
        """
        if requires_grad is not None and core is None:
            if type(data) is not NeuronTensor:
                return torch.nn.Parameter(data, requires_grad=requires_grad)
            r = _new(cls, data._data, data._core, requires_grad)
            r._is_param = True
            return r
        return _new(cls, data, 0 if core is None else core, bool(requires_grad))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: D105
        # Replaced by set_dispatch with the dispatcher itself (one Python frame less per op).
        return _DISPATCH(func, args, kwargs or {})

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        # The host data's repr with the suffixes a real device tensor's repr shows, in torch's order: device, then
        # dtype (and size), then grad_fn or requires_grad. A parameter is prefixed as torch.nn.Parameter prints.
        body = repr(self._data)[:-1]
        at = body.find(", dtype=")
        device = f", device='neuron:{self._core}'"
        body = body[:at] + device + body[at:] if at >= 0 else body + device
        if self.grad_fn is not None:
            body += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            body += ", requires_grad=True"
        return ("Parameter containing:\n" if getattr(self, "_is_param", False) else "") + body + ")"

    def __format__(self, format_spec: str) -> str:
        # torch.Tensor.__format__ formats a 0-d tensor as its Python number only when type(self) is Tensor; a
        # subclass falls to object.__format__, which rejects any spec (format(t, ".3e") raised TypeError).
        if self.dim() == 0 and not self.is_meta:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    @property
    def data(self) -> torch.Tensor:  # noqa: D102
        return _DATA.__get__(self)

    @data.setter
    def data(self, new: torch.Tensor) -> None:
        # Tensor.data = x swaps the wrapper's metadata (shape, strides, dtype) in C++; the host data the values live
        # in is this Python attribute and must follow, or the tensor keeps its old values under the new shape
        # (Transformers' resize_token_embeddings: silently wrong embeddings).
        _DATA.__set__(self, new)
        if type(new) is NeuronTensor:
            self._data = new._data
            self._core = new._core

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


_DATA = torch._C.TensorBase.data


def _new(cls, data: torch.Tensor, core: int, requires_grad: bool) -> NeuronTensor:
    r = _make_wrapper(
        cls, data.size(), strides=data.stride(), storage_offset=data.storage_offset(), dtype=data.dtype,
        device=device_for(core), requires_grad=requires_grad,
    )
    r._data = data
    r._core = core
    return r


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
_STRIDED = torch.strided
_track = memory.track


def sync_meta(t: NeuronTensor) -> None:
    """After an op changed the host data's metadata in place (set_, resize_, t_, an ``out=`` resized), give the
    wrapper the same shape, strides and offset: the wrapper's own metadata is fixed at creation."""
    inner = t._data
    if t.size() != inner.size() or t.stride() != inner.stride() or t.storage_offset() != inner.storage_offset():
        _DATA.__set__(t, wrap(inner, t._core))


def wrap(data: torch.Tensor, core: int) -> NeuronTensor:
    """Wrap a host tensor as a device tensor on ``core`` and account its memory (skipped while tracing).

    Builds the wrapper inline rather than through NeuronTensor(...): this runs once per device op.
    """
    # Positional arguments (size, strides, storage_offset, memory_format, dtype, layout, device; requires_grad keeps
    # its default False): the same call as the keyword form, ~0.3 us less of argument parsing on every device op.
    r = _make_wrapper(
        NeuronTensor, data.size(), data.stride(), data.storage_offset(), None, data.dtype, _STRIDED,
        _DEVICES[core] if core < len(_DEVICES) else device_for(core),
    )
    r._data = data
    r._core = core
    if type(data) is _Tensor and not data.is_meta:
        _track(r, data, core)
    return r
