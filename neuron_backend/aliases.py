"""What an op returns that aliases an input it writes (``out=``, in-place ops), read once per op from its schema.

The device's dispatch returns those inputs themselves, re-syncing wrapper metadata where the op may change it.
"""

from __future__ import annotations

import torch

from neuron_backend.tensor import NeuronTensor, sync_meta, wrap

_Tensor = torch.Tensor

# op -> ((return index, positional arg index or kwarg name), ...) for returns that alias a mutated input.
WRITE_ALIASES: dict[int, tuple] = {}

# Ops that change the metadata of a tensor they write (set_, resize_, in-place views, ``out=`` that resizes): the
# wrapper's shape/strides are re-synced from its host data after them (tensor.sync_meta).
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


def _synced(func, out):
    """``out`` (an aliased input, or a tuple of them) with wrapper metadata re-synced where ``func`` may change it."""
    if _meta_sync.get(id(func)):
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if type(o) is NeuronTensor:
                sync_meta(o)
    return out


def wrap_out(func, out, args, kwargs, core):
    """``out`` as the device returns it: written inputs themselves where the op aliases them, the rest wrapped."""
    if type(out) is _Tensor:
        aliases = WRITE_ALIASES.get(id(func))
        if aliases is None:
            aliases = _write_alias_map(func)
        if not aliases:
            return wrap(out, core)
    else:
        aliases = _write_alias_map(func)
    if aliases:
        if len(func._schema.returns) == 1:
            idx = aliases[0][1]
            return _synced(func, kwargs[idx] if isinstance(idx, str) else args[idx])
        out = list(out)
        for ri, idx in aliases:
            out[ri] = kwargs[idx] if isinstance(idx, str) else args[idx]
        for i, o in enumerate(out):
            if isinstance(o, _Tensor) and type(o) is not NeuronTensor:
                out[i] = wrap(o, core)
        return _synced(func, tuple(out))
    t = type(out)
    if t is _Tensor:
        return wrap(out, core)
    if t is tuple or t is list:
        return t(
            wrap(o, core) if isinstance(o, _Tensor)
            else (t(wrap(x, core) for x in o) if type(o) in (list, tuple) and o and isinstance(o[0], _Tensor) else o)
            for o in out
        )
    if isinstance(out, _Tensor):  # a FakeTensor while Dynamo/AOT trace through the device
        return wrap(out, core)
    return out
