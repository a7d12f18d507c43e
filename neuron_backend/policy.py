"""What the device does with one (op, input dtypes): run natively, with bf16 matmul numerics, wrap int64, decompose,
fall back to the CPU, or reject with a typed error. Pure decisions over the active profile; dispatch.py caches them.
"""

from __future__ import annotations

import torch
from torch._decomp import decomposition_table

from neuron_backend import profiles
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError
from neuron_backend.numerics import MATMUL_OPERANDS
from neuron_backend.stats import dtype_name

NATIVE, MATMUL, INT64_OP, DECOMPOSE, FALLBACK, UNSUPPORTED, COMPOSITE, MATERIALIZE, KERNEL_FAIL = range(9)
# Views that only set a lazy conjugate/negative bit: the device returns them as plain tensors holding those values
# (numerics.materialize), since host kernels run inside __torch_dispatch__ would read past the bit.
LAZY_BIT_VIEWS = frozenset({"aten::_conj", "aten::_neg_view"})
_F32 = torch.float32
_I64 = torch.int64
_BOOL = torch.bool

# Ops whose lowering is running now: a lowering that calls its own op again would recurse without end.
_decomposing: set = set()
# (op, dtypes) -> (error class, reason) for rejected keys, so the error raised later carries the decision's reason.
_rejections: dict[tuple, tuple[type[NeuronUnsupportedOpError], str]] = {}


def active() -> profiles.Profile:
    return profiles.load(CONFIG.profile)


def _verdict(func, dtypes: list[torch.dtype]) -> tuple[int, type[NeuronUnsupportedOpError] | None, str]:
    prof = active()
    name = func._schema.name
    for d in dtypes:
        if d in prof.rejected_dtypes:
            return UNSUPPORTED, NeuronUnsupportedDtypeError, prof.rejected_dtypes[d]
    issue = prof.kernel_failures.get(name)
    if issue is not None and issue.precondition is None and (issue.dtypes is None or set(dtypes) & issue.dtypes):
        return KERNEL_FAIL, NeuronUnsupportedOpError, f"{issue.reason} ({issue.source})"
    for d in dtypes:
        if d in prof.forbidden or d not in prof.device_dtypes:
            return UNSUPPORTED, NeuronUnsupportedDtypeError, f"{dtype_name(d)} is not a NeuronCore data type"
    if name.startswith("prims::"):
        # Reference decompositions bottom out in prims; a prim runs where its aten namesake is native.
        name = "aten::" + name[len("prims::"):]
    if name in prof.views or (name.endswith("_") and name[:-1] in prof.views):
        return (MATERIALIZE if name in LAZY_BIT_VIEWS else NATIVE), None, ""
    r = prof.restrictions.get(name)
    if r is not None:
        if r.kind == "bool_index":
            if _BOOL in dtypes[1:]:
                return UNSUPPORTED, NeuronUnsupportedOpError, r.reason
        elif r.kind == "dtype":
            if any(d not in r.dtypes for d in dtypes):
                return UNSUPPORTED, NeuronUnsupportedDtypeError, r.reason
        else:
            return UNSUPPORTED, NeuronUnsupportedOpError, r.reason
    allowed = prof.native_dtypes(name)
    if allowed is not None:
        bad = [d for d in dtypes if d not in allowed]
        if bad:
            return UNSUPPORTED, NeuronUnsupportedDtypeError, (
                f"{name} runs on the device for {', '.join(sorted(dtype_name(d) for d in allowed))} only"
            )
        if name in MATMUL_OPERANDS and CONFIG.autocast_matmul and _F32 in dtypes:
            return MATMUL, None, ""
        if _I64 in dtypes and name in prof.int64_ops:
            return INT64_OP, None, ""
        return NATIVE, None, ""
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
        # A composite op (aten::to, movedim, diag) reaches the device only when a decomposition calls it below
        # autograd; its own composite kernel is its lowering.
        return COMPOSITE, None, ""
    if func in decomposition_table:
        return DECOMPOSE, None, ""
    return UNSUPPORTED, NeuronUnsupportedOpError, f"not in the '{prof.name}' op table and no decomposition"


def decide(func, dtypes: list[torch.dtype], args=(), kwargs=None) -> int:
    """The decision for one (op, input dtypes) under the active profile and settings."""
    decision, cls, reason = _verdict(func, dtypes)
    if decision == KERNEL_FAIL:
        _rejections[(func, *dtypes)] = (cls, reason)
    if decision == UNSUPPORTED:
        if CONFIG.cpu_fallback and not any(d in active().rejected_dtypes for d in dtypes):
            return FALLBACK
        _rejections[(func, *dtypes)] = (cls, reason)
    return decision


def explain(op: torch._ops.OpOverload, dtypes: list[torch.dtype]) -> str:
    """Human-readable decision for one (op, dtypes), for docs and the harness' attribution."""
    decision, cls, reason = _verdict(op, dtypes)
    names = ["native", "native (bf16 matmul numerics)", "native (int64 as int32)", "decomposed", "cpu fallback",
             "unsupported", "composite (lowered by its own kernel)",
             "native (materialized: the device keeps no lazy conjugate/negative views)", "kernel fails at execution"]
    return names[decision] + (f": {reason}" if reason else "")


def error_for(func, dtypes, shapes) -> NeuronUnsupportedOpError:
    cls, reason = _rejections.get((func, *dtypes)) or _verdict(func, dtypes)[1:]
    return cls(func._schema.name, [dtype_name(d) for d in dtypes], shapes, reason)


def check_device_dtype(op: str, dtype: torch.dtype, src: torch.Tensor | None = None) -> None:
    """Reject creating or converting to a dtype the device cannot hold (the fnuz FP8 types) with the typed error."""
    prof = active()
    if dtype in prof.rejected_dtypes or dtype in prof.forbidden or dtype not in prof.device_dtypes:
        if CONFIG.cpu_fallback and dtype not in prof.rejected_dtypes:
            return
        shapes = [tuple(src.shape)] if src is not None else []
        names = [dtype_name(src.dtype), dtype_name(dtype)] if src is not None else [dtype_name(dtype)]
        raise NeuronUnsupportedDtypeError(op, names, shapes, f"{dtype_name(dtype)} is not a NeuronCore data type")


def run_decomposition(func, dtypes, args, kwargs, shapes_fn):
    """Lower ``func`` through PyTorch's decomposition table; each resulting op is decided on its own.

    If a lowered op is unsupported the error names ``func`` (what the model called) and the op it lowered to.
    """
    if func in _decomposing:  # the lowering calls the op itself again: it does not reach native ops
        raise NeuronUnsupportedOpError(func._schema.name, [dtype_name(d) for d in dtypes], shapes_fn(args, kwargs),
                                       f"not in the '{active().name}' op table and its decomposition recurses")
    _decomposing.add(func)
    try:
        if decision_is_composite(func):
            return func.decompose(*args, **kwargs)
        out = decomposition_table[func](*args, **kwargs)
        if out is NotImplemented:  # the decomposition does not cover these arguments
            raise NeuronUnsupportedOpError(func._schema.name, [dtype_name(d) for d in dtypes], shapes_fn(args, kwargs),
                                           "its decomposition does not cover these arguments")
        return out
    except NeuronUnsupportedOpError as e:
        if e.op == func._schema.name:
            raise
        raise type(e)(
            func._schema.name, [dtype_name(d) for d in dtypes], shapes_fn(args, kwargs),
            f"decomposes to {e.op} ({', '.join(e.dtypes)}), which is unsupported: {e.reason}",
        ) from e
    finally:
        _decomposing.discard(func)


def decision_is_composite(func) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")
