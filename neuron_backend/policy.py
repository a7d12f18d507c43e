"""What the device does with one (op, input dtypes): run natively, with bf16 matmul numerics, decompose, check a known
kernel failure, fall back to the CPU, or reject with a typed error. Pure decisions over the active profile.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._decomp import decomposition_table

from neuron_backend import errors
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError
from neuron_backend.hardware import profiles
from neuron_backend.hardware.matmul_autocast import MATMUL_OPERANDS
from neuron_backend.stats import dtype_name

NATIVE, MATMUL, INT64_OP, DECOMPOSE, FALLBACK, UNSUPPORTED, COMPOSITE, MATERIALIZE, KERNEL_FAIL = range(9)
# Views that only set a lazy conjugate/negative bit: the device returns them as plain tensors holding those values
# (numerics.materialize), since host kernels run inside __torch_dispatch__ would read past the bit.
LAZY_BIT_VIEWS = frozenset({"aten::_conj", "aten::_neg_view"})
_F32 = torch.float32
_I64 = torch.int64
_COMPLEX = (torch.complex64, torch.complex128, torch.complex32)

# Ops (by id) whose lowering is running now: a lowering that calls its own op again would recurse without end.
_decomposing: set = set()
# id(op) -> (whether it is its own composite kernel, the callable that lowers it: that kernel or its table entry)
_lowerings: dict[int, tuple[bool, Callable]] = {}
# (op, dtypes) -> (error class, reason) for rejected keys, so the error raised later carries the decision's reason.
_rejections: dict[tuple, tuple[type[NeuronUnsupportedOpError], str]] = {}
class NeuronKernelValueError(errors.NeuronKernelError, ValueError):
    """A known kernel failure the real device raises as ValueError (grouped_mm's can_handle)."""


def active() -> profiles.Profile:
    return profiles.load(CONFIG.profile, CONFIG.switches)


def _data(t):
    return getattr(t, "_data", t)


def _grouped_mm_refused(args, kwargs) -> bool:
    """True when torch-neuronx's grouped_mm would raise: validate_offs (grouped_mm.py:12-24 in the pre-release
    source): 2D x 2D groups a's dim 1, 2D x 3D groups a's dim 0; that size and every offs entry must be multiples of
    128, offs within the size and sorted. And bfloat16 only: real Trn2 with torch-neuronx 2.12.3 has no fp32 path
    (A's deepseek-v4-flash-runlog, profile source obs:A_deepseek_runlog). Other layouts have no Neuron
    implementation (no failure here: they fall back)."""
    a, b = _data(args[0]), _data(args[1])
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    if offs is None or a.dim() != 2 or b.dim() not in (2, 3):
        return False
    if a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        return True
    t = a.shape[1] if b.dim() == 2 else a.shape[0]
    o = _data(offs)
    return bool(t % 128 or (o < 0).any() or (o > t).any() or (o % 128 != 0).any()
                or (len(o) > 1 and (o[1:] < o[:-1]).any()))


def _integer_data_operand(args, kwargs) -> bool:
    """The op's data operand (its first tensor argument: what is multiplied or scattered, not an index) is an
    integer or bool tensor: the operand the compiler's NCC_EVRF035 / NCC_EVRF060 pages name."""
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return first is not None and not first.dtype.is_floating_point and not first.dtype.is_complex


# Named preconditions of KnownIssue.precondition: predicate(args, kwargs) -> True when the known failure applies.
PRECONDITIONS: dict[str, Callable] = {"grouped_mm_128_alignment_bf16": _grouped_mm_refused,
                                      "integer_data_operand": _integer_data_operand}


def kernel_failure(func, dtypes, args=(), kwargs=None) -> profiles.KnownIssue | None:
    """The profile's known issue that applies to this call (after input autocast), or None: evaluate per call."""
    issue = active().kernel_failures.get(func._schema.name)
    if issue is None or (issue.dtypes is not None and not any(d in issue.dtypes for d in dtypes)):
        return None
    if issue.precondition is not None:
        if CONFIG.skip_op_preconditions:  # TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1
            return None
        if not PRECONDITIONS[issue.precondition](args, kwargs or {}):
            return None
    return issue


def _fallback(name: str, prof: profiles.Profile, reason: str, cls=NeuronUnsupportedOpError):
    return FALLBACK, cls, f"{reason}; runs on the CPU on the real device ({prof.source_of(name)})"


def _verdict(func, dtypes: list[torch.dtype]) -> tuple[int, type[NeuronUnsupportedOpError] | None, str]:
    """The decision ignoring the fallback setting: FALLBACK carries the error class and reason strict mode raises."""
    prof = active()
    name = func._schema.name
    for d in dtypes:
        if d in prof.rejected_dtypes:
            return UNSUPPORTED, NeuronUnsupportedDtypeError, prof.rejected_dtypes[d]
    if name.startswith("prims::"):
        # Reference decompositions (compiled graphs) bottom out in prims: a prim follows its aten namesake where the
        # profile has one; the rest (convert_element_type, bessel_i0, ...) are primitives any lowering has.
        name = "aten::" + name[len("prims::"):]
        if prof._entry(name) is None:
            return NATIVE, None, ""
    if name in LAZY_BIT_VIEWS:
        return MATERIALIZE, None, ""
    if name in CONFIG.cpu_ops:  # NEURON_CPU_OPS, the harness's blocker chains: ahead of the table and known issues
        return FALLBACK, NeuronUnsupportedOpError, "moved to the CPU fallback by NEURON_CPU_OPS (a harness setting)"
    entry = prof._entry(name)
    if entry is None:
        if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
            # A composite op (aten::to, movedim) reaches the device only when a decomposition calls it below
            # autograd; its own composite kernel is its lowering.
            return COMPOSITE, None, ""
        return _fallback(name, prof, f"no Neuron implementation in the '{prof.name}' profile")
    if entry.cls == "unsupported":
        return UNSUPPORTED, NeuronUnsupportedOpError, f"not supported on Neuron ({prof.source_of(name)})"
    if entry.cls == "cpu_fallback":
        return _fallback(name, prof, "registered as a CPU fallback")
    bad = [d for d in dtypes if d not in entry.dtypes]
    if bad:
        allowed = ", ".join(sorted(dtype_name(d) for d in entry.dtypes))
        return _fallback(name, prof, f"{name} runs on the device for {allowed} only", NeuronUnsupportedDtypeError)
    if name in prof.kernel_failures:
        issue = prof.kernel_failures[name]
        if issue.dtypes is None or any(d in issue.dtypes for d in dtypes):
            return KERNEL_FAIL, NeuronKernelValueError if issue.error == "ValueError" else errors.NeuronKernelError, (
                f"{issue.reason} ({issue.source})")
    if entry.cls == "composite":
        if decision_is_composite(func):  # CompositeImplicitAutograd: its own kernel is its lowering
            return COMPOSITE, None, ""
        return (DECOMPOSE if func in decomposition_table else NATIVE), None, ""
    if name in MATMUL_OPERANDS and CONFIG.autocast_matmul and _F32 in dtypes:
        return MATMUL, None, ""
    if _I64 in dtypes and name in prof.int64_ops:
        return INT64_OP, None, ""
    return NATIVE, None, ""


def decide(func, dtypes: list[torch.dtype], args=(), kwargs=None) -> int:
    """The decision for one (op, input dtypes after autocast) under the active profile and settings.

    KERNEL_FAIL means: call ``kernel_failure(func, dtypes, args, kwargs)`` per call; when it returns an issue, raise
    ``error_for`` and, if ``issue.cpu_retry`` and fallback is allowed, rerun on the CPU; otherwise run natively.
    """
    decision, cls, reason = _verdict(func, dtypes)
    if decision == FALLBACK and not CONFIG.cpu_fallback and func._schema.name not in CONFIG.cpu_ops:
        decision = UNSUPPORTED
        reason += "; strict mode (NEURON_CPU_FALLBACK=0): nothing falls back"
    if decision in (UNSUPPORTED, KERNEL_FAIL):
        _rejections[(func, *dtypes)] = (cls, reason)
    return decision


_NAMES = ["native", "native (bf16 matmul numerics)", "native (int64 as int32)", "decomposed", "cpu fallback",
          "unsupported", "composite (lowered by its own kernel)",
          "native (materialized: the device keeps no lazy conjugate/negative views)", "native, known kernel failure"]


def explain(op: torch._ops.OpOverload, dtypes: list[torch.dtype]) -> str:
    """Human-readable decision for one (op, dtypes), for docs and the harness' attribution."""
    decision, cls, reason = _verdict(op, dtypes)
    if decision == FALLBACK and not CONFIG.cpu_fallback:
        decision = UNSUPPORTED
    return _NAMES[decision] + (f": {reason}" if reason else "")


def error_for(func, dtypes, shapes) -> NeuronUnsupportedOpError:
    cls, reason = _rejections.get((func, *dtypes)) or _verdict(func, dtypes)[1:]
    return (cls or NeuronUnsupportedOpError)(func._schema.name, [dtype_name(d) for d in dtypes], shapes, reason)


def complex_decompose() -> bool:
    return CONFIG.complex_decompose


def check_device_dtype(op: str, dtype: torch.dtype, src: torch.Tensor | None = None) -> None:
    """Reject creating or converting to a dtype the device cannot hold: the profile's rejected (fnuz FP8) dtypes,
    and complex in strict mode when complex decomposition is off. float64/int64 live on the device (computed 32-bit)."""
    prof = active()
    reason = prof.rejected_dtypes.get(dtype)
    if reason is None and dtype in _COMPLEX and not complex_decompose() and not CONFIG.cpu_fallback:
        reason = "complex decomposition is off (TORCH_NEURONX_COMPLEX_DECOMPOSE=0) and strict mode allows no fallback"
    if reason is None:
        return
    shapes = [tuple(src.shape)] if src is not None else []
    names = [dtype_name(src.dtype), dtype_name(dtype)] if src is not None else [dtype_name(dtype)]
    raise NeuronUnsupportedDtypeError(op, names, shapes, reason)


def run_decomposition(func, dtypes, args, kwargs, shapes_fn):
    """Lower ``func`` through PyTorch's decomposition table; each resulting op is decided on its own.

    If a lowered op is unsupported the error names ``func`` (what the model called) and the op it lowered to.
    """
    # Keyed by id(func): OpOverload.__hash__ is Python code, and this runs for every decomposed op of every call
    # (scaled_dot_product_attention, _safe_softmax, _unsafe_view, zeros_like: ~10 per tiny-Llama forward).
    fid = id(func)
    if fid in _decomposing:  # the lowering calls the op itself again: it does not reach native ops
        raise NeuronUnsupportedOpError(func._schema.name, [dtype_name(d) for d in dtypes], shapes_fn(args, kwargs),
                                       f"its decomposition recurses in the '{active().name}' profile")
    lowering = _lowerings.get(fid)
    if lowering is None:
        # The op's own composite kernel, else its table entry: looked up once per op, like the DECOMPOSE/COMPOSITE
        # decision that led here (itself read from the same two sources); dispatch.clear_cache forgets both.
        composite = decision_is_composite(func)
        lowering = _lowerings[fid] = (composite, func.decompose if composite else decomposition_table[func])
    composite, lower = lowering
    _decomposing.add(fid)
    try:
        if composite:
            return lower(*args, **kwargs)
        out = lower(*args, **kwargs)
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
        _decomposing.discard(fid)


def decision_is_composite(func) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")
