"""What an op returns that aliases an input it writes (``out=``, in-place ops), read once per op from its schema.

The device's dispatch returns those inputs themselves, re-synced from their host aliases where the op may change them.
"""

from __future__ import annotations

import torch

from neuron_backend.tensor import sync, wrap

_Tensor = torch.Tensor

# op -> ((return index, positional arg index or kwarg name), ...) for returns that alias a mutated input.
WRITE_ALIASES: dict[int, tuple] = {}

# Ops that change the metadata of a tensor they write (set_, resize_, in-place views, ``out=`` that resizes): the
# device tensor takes the shape/strides (and storage, if resized) of its host alias after them (tensor.sync).
_META_OPS = frozenset({
    "aten::set_", "aten::resize_", "aten::resize_as_", "aten::as_strided_", "aten::transpose_", "aten::t_",
    "aten::squeeze_", "aten::unsqueeze_", "aten::swapaxes_", "aten::swapdims_", "aten::_resize_output_",
})
_meta_sync: dict[int, bool] = {}


def _write_alias_map(func) -> tuple:
    found = WRITE_ALIASES.get(id(func))
    if found is not None:
        return found
    result = []
    schema = func._schema
    for ri, ret in enumerate(schema.returns):
        info = ret.alias_info
        if info is None or not info.is_write:
            continue
        for ai, arg in enumerate(schema.arguments):
            a_info = arg.alias_info
            if a_info is not None and a_info.is_write and a_info.before_set == info.before_set:
                result.append((ri, arg.name if arg.kwarg_only else ai))
                break
    found = tuple(result)
    WRITE_ALIASES[id(func)] = found
    _meta_sync[id(func)] = bool(found) and (
        schema.name in _META_OPS or any(isinstance(idx, str) for _, idx in found))
    return found


def _host_of(idx, new_args, new_kwargs):
    if new_args is None:
        return None
    if isinstance(idx, str):
        return new_kwargs.get(idx) if new_kwargs else None
    return new_args[idx] if idx < len(new_args) else None


def _synced(func, out, aliases, new_args, new_kwargs):
    """``out`` (an aliased input, or a tuple of them) re-synced from its host alias where ``func`` may change it."""
    if _meta_sync.get(id(func)):
        for ri, idx in aliases:
            d = out[ri] if isinstance(out, tuple) else out
            h = _host_of(idx, new_args, new_kwargs)
            if isinstance(d, _Tensor) and isinstance(h, _Tensor) and d.device.type == "neuron" and h is not d:
                sync(d, h)
    return out


def _wrapped(o, core):
    return wrap(o, core) if o.device.type != "neuron" else o


def wrap_out(func, out, args, kwargs, core, new_args=None, new_kwargs=None):
    """``out`` as the device returns it: written inputs themselves where the op aliases them, the rest wrapped
    (host results adopted as device tensors; ``new_args``/``new_kwargs``: the host aliases the op ran on)."""
    if type(out) is _Tensor:
        aliases = WRITE_ALIASES.get(id(func))
        if aliases is None:
            aliases = _write_alias_map(func)
        if not aliases:
            return _wrapped(out, core)
    else:
        aliases = _write_alias_map(func)
    if aliases:
        if len(func._schema.returns) == 1:
            idx = aliases[0][1]
            return _synced(func, kwargs[idx] if isinstance(idx, str) else args[idx], aliases, new_args, new_kwargs)
        out = list(out)
        for ri, idx in aliases:
            out[ri] = kwargs[idx] if isinstance(idx, str) else args[idx]
        for i, o in enumerate(out):
            if isinstance(o, _Tensor):
                out[i] = _wrapped(o, core)
        return _synced(func, tuple(out), aliases, new_args, new_kwargs)
    t = type(out)
    if isinstance(out, _Tensor):
        return _wrapped(out, core)
    if t is tuple or t is list:
        return t(
            _wrapped(o, core) if isinstance(o, _Tensor)
            else (t(_wrapped(x, core) for x in o) if type(o) in (list, tuple) and o and isinstance(o[0], _Tensor)
                  else o)
            for o in out
        )
    return out
