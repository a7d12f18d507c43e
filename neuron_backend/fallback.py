"""The CPU fallback's host execution: run an op the device rejected on host tensors, even where the host's own kernel
lacks the input dtype (histc on Int), by its decomposition or in a wider dtype cast back.

Why: a fallback exists to run what the device could not, and the ops that fall back are exactly the unusual
(op, dtype) pairs, e.g. Transformers' MoE routing calls ``histc`` on integer expert ids on every non-CPU device, and
the CPU has no integer histc either (only CUDA does). When the host kernel reports "not implemented for '<dtype>'":
1. the op's own decomposition (``torch._decomp.decomposition_table``) runs on the host, if it has one; else
2. inputs of a dtype in ``WIDER`` are computed in the wider dtype (integers and bool -> float64, exact for
   |x| <= 2**53, which covers every value the device holds since int64 lives as int32; float16/bfloat16 -> float32),
   and outputs that came back in the wider dtype are cast to the dtype the op would have produced for the original
   inputs (their promoted dtype). Other outputs (indices, bools) are left as they are.
Ops that write into an argument (in-place, out=) are not widened: a widened copy would break the aliasing, so their
original error stands. Any other host error is raised unchanged.
"""

from __future__ import annotations

import re

import torch
from torch._decomp import decomposition_table

_NOT_IMPLEMENTED = re.compile(r"not implemented for '(\w+)'")
_F64 = torch.float64
_F32 = torch.float32
# Host compute dtype for an input dtype the host kernel may lack.
WIDER: dict[torch.dtype, torch.dtype] = {
    torch.bool: _F64, torch.uint8: _F64, torch.int8: _F64, torch.int16: _F64, torch.int32: _F64, torch.int64: _F64,
    torch.float16: _F32, torch.bfloat16: _F32,
}


def _missing_kernel(exc: BaseException) -> bool:
    return isinstance(exc, (NotImplementedError, RuntimeError)) and bool(_NOT_IMPLEMENTED.search(str(exc)))


def tensors_in(args, kwargs):
    """The tensors among an op's arguments, including those inside list/tuple arguments."""
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, torch.Tensor))


def _widen(a):
    if isinstance(a, torch.Tensor) and a.dtype in WIDER:
        return a.to(WIDER[a.dtype])
    if isinstance(a, (list, tuple)):
        return type(a)(_widen(x) for x in a)
    return a


def _narrow(out, wide: set[torch.dtype], target: torch.dtype):
    if isinstance(out, torch.Tensor):
        return out.to(target) if out.dtype in wide and out.dtype != target else out
    if isinstance(out, (list, tuple)):
        return type(out)(_narrow(o, wide, target) for o in out)
    return out


def _widened(func, args, kwargs):
    """Run ``func`` with the inputs of a dtype in WIDER widened; None when nothing can be widened."""
    originals = [t.dtype for t in tensors_in(args, kwargs) if t.dtype in WIDER]
    if not originals or func._schema.is_mutable:
        return None
    target = originals[0]
    for d in originals[1:]:
        target = torch.promote_types(target, d)
    wide = {WIDER[d] for d in originals}
    out = func(*[_widen(a) for a in args], **{k: _widen(v) for k, v in kwargs.items()})
    return (_narrow(out, wide, target),)


def run_on_host(func, args, kwargs):
    """Run ``func`` on host (CPU) tensors for the fallback; see the module docstring for the missing-kernel rules."""
    try:
        return func(*args, **kwargs)
    except (NotImplementedError, RuntimeError) as exc:
        if not _missing_kernel(exc):
            raise
        first = exc
    decomposition = decomposition_table.get(func)
    if decomposition is not None:
        try:
            out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        except (NotImplementedError, RuntimeError) as exc:
            if not _missing_kernel(exc):
                raise
    try:
        done = _widened(func, args, kwargs)
    except (NotImplementedError, RuntimeError) as exc:
        if not _missing_kernel(exc):
            raise
        raise first from exc
    if done is None:
        raise first
    return done[0]


__all__ = ["run_on_host", "WIDER"]
