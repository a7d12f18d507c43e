"""Dtype autocast of op inputs as torch-neuronx does it: 64-bit inputs computed as 32-bit, complex ops decomposed.

Pure helpers over host tensors; dispatch.py decides when they apply (once per (op, dtypes)) and wraps the results.

Sources (pre-beta torch-neuronx, INDICATIVE not the release: parmoham-aws/test-repo-parmoham @
98154b867aa24562a3213e520d9ad7fd41032291):
- torch_neuronx/python_ops/dtype_autocast.py, DtypeAutocastContext: op inputs of dtype float64 -> float32 and
  int64 -> int32, only tensors with ``ndim != 0`` (0-d scalars keep their dtype); ``restore_dtypes``: a float32 output
  becomes float64 when a float64 input was cast (int32 -> int64 likewise).
- torch_neuronx/python_ops/cast_policy.py: copies to or from 64-bit dtypes "bounce through CPU", i.e. a device tensor
  of dtype int64/float64 holds 64-bit values; only the computation is 32-bit.
- Complex: TORCH_NEURONX_COMPLEX_DECOMPOSE (default True for PyTorch >= 2.13) "Enables framework decomposition of
  complex operations before lowering" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/
  env-vars.html, 2026-10-14). The decomposed real ops run on the device, so a complex op is not a CPU fallback.

How the simulation computes it (the int64 overflow behaviour):
- float64 inputs are cast to float32, the op runs in float32, float32 outputs come back as float64: values carry
  float32 precision.
- int64 inputs have their values wrapped to int32 (``x.to(int32)``, two's complement: 2**31 -> -2**31) and the op runs
  on those; every int64 output is wrapped to int32 range too. Storage keeps 64 bits, so a value above 2**31 survives a
  host -> device -> host round trip unchanged, but any op on it sees (and produces) the wrapped 32-bit value.
  For speed the wraps are skipped where they cannot change a value: an input is wrapped only if its storage may hold
  values outside int32 (recorded where such values enter the device: a host copy, a conversion, a CPU-fallback
  result, see ``note_entry``); an output only if the op can compute new values (not for ``VALUE_PRESERVING`` ops,
  whose outputs are copies of in-range inputs).
  (Computing on wrapped int64 rather than on int32 tensors gives the same values for the ring ops - add, sub, mul,
  cumsum, comparisons of the wrapped inputs - and keeps host kernels that need int64 indices (gather, scatter) usable.)
- complex128 is computed as complex64 (its decomposition's float64 parts are autocast to float32) and restored.
- View ops are never cast (a view must alias its base); ops that write an input (in-place, ``out=``) run on the 64-bit
  data and then have the written 64-bit tensors rounded/wrapped in place (a simplification of the source, which casts
  copies and writes results back).
"""

from __future__ import annotations

import torch

from neuron_backend.tensor import _C, host

_F64, _F32, _I64, _I32 = torch.float64, torch.float32, torch.int64, torch.int32
_C128, _C64 = torch.complex128, torch.complex64
COMPLEX = frozenset({torch.complex32, torch.complex64, torch.complex128})

# Ops whose int64 outputs only copy or select input values (and bitwise ops, which keep sign-extended int32 values):
# on in-range inputs their outputs are in range, so they need no output wrap.
VALUE_PRESERVING = frozenset({
    "aten::cat", "aten::clone", "aten::stack", "aten::index", "aten::index_select", "aten::gather",
    "aten::embedding", "aten::max", "aten::min", "aten::amax", "aten::amin", "aten::maximum", "aten::minimum",
    "aten::sort", "aten::topk", "aten::flip", "aten::roll", "aten::repeat", "aten::bitwise_and", "aten::bitwise_or",
    "aten::bitwise_xor", "aten::bitwise_not", "aten::masked_select", "aten::tril", "aten::triu",
})
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
# data_ptr of host storages that may hold int64 values outside int32 (see note_entry) -> C-level weak reference to the
# storage; usually empty. Dead entries are pruned when an entry is added or an int64 op runs (prune_wide).
_wide: dict[int, int] = {}
_expired = torch.UntypedStorage._expired
_free_ref = torch.UntypedStorage._free_weak_ref
# id(op) -> whether its int64 outputs need the wrap
_wraps: dict[int, bool] = {}

# The active profile's input casts (profile.input_autocast), refreshed by dispatch.clear_cache.
_cast: dict[torch.dtype, torch.dtype] = {}
_complex = [True]


def refresh(input_autocast: dict[torch.dtype, torch.dtype], complex_decompose: bool) -> None:
    """Take the active profile's casts and the complex-decomposition setting."""
    _cast.clear()
    _cast.update(input_autocast)
    _complex[0] = complex_decompose


def casts_int64() -> bool:
    """True when int64 is computed as int32 by input autocast (then storage keeps 64-bit values)."""
    return _cast.get(_I64) is _I32


def kind(dtypes) -> str | None:
    """``"complex"`` (decomposed), ``"cast"`` (64-bit inputs) or None for an op's input dtypes."""
    found = None
    for d in dtypes:
        if d in COMPLEX and _complex[0]:
            return "complex"
        if d in _cast:
            found = "cast"
    return found


# A decomposed complex op runs as real ops on its parts: the op table is consulted with the real dtype.
_REAL = {torch.complex32: torch.float16, torch.complex64: _F32, torch.complex128: _F32}


def mapped(dtypes) -> list[torch.dtype]:
    """The dtypes the device computes in (what the op table is consulted with)."""
    if _complex[0]:
        return [_REAL.get(d) or _cast.get(d, d) for d in dtypes]
    return [_cast.get(d, d) for d in dtypes]


def _wrap_i64(t: torch.Tensor) -> torch.Tensor:
    return t.to(_I32).to(_I64) if t.numel() else t


def note_entry(t: torch.Tensor) -> None:
    """Host data entering the device other than as an op result (copy from the host, dtype conversion, fallback
    result): remember its storage if it holds int64 values outside int32, so ops wrap it as an input."""
    if t.dtype is _I64 and isinstance(t, torch.Tensor) and not t.is_meta and t.numel() and _I64 in _cast:
        # The values are read on a host alias (no device op is recorded); the device storage is what is remembered.
        lo, hi = torch.aminmax(host(t) if t.device.type == "neuron" else t)
        if lo.item() < _I32_MIN or hi.item() > _I32_MAX:
            prune_wide()
            storage = t.untyped_storage()
            old = _wide.pop(storage.data_ptr(), None)
            if old is not None:
                _free_ref(old)
            _wide[storage.data_ptr()] = storage._weak_ref()
            _C.set_wide(True)  # the C++ fast path leaves int64 ops to _run_cast while any storage is wide


def _is_wide(t: torch.Tensor) -> bool:
    if type(t) is not torch.Tensor or t.is_meta:  # FakeTensors while tracing have no data pointer
        return False
    ref = _wide.get(t.untyped_storage().data_ptr())
    return ref is not None and not _expired(ref)


def prune_wide() -> None:
    """Forget the wide storages that have died."""
    for ptr in [p for p, ref in _wide.items() if _expired(ref)]:
        _free_ref(_wide.pop(ptr))
    _C.set_wide(bool(_wide))


def output_wraps(func) -> bool:
    """Whether ``func``'s int64 outputs are wrapped (it can compute values outside the inputs' range)."""
    found = _wraps.get(id(func))
    if found is None:
        found = _wraps[id(func)] = func._schema.name not in VALUE_PRESERVING
    return found


def cast_inputs(values: list, complex_too: bool) -> tuple[list, bool, bool]:
    """Inputs as the device computes them: (values, had float64 cast, had complex128 cast). Lists are walked."""
    had_f64 = had_c128 = False
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            d = v.dtype
            if d is _F64 and v.ndim != 0 and _F64 in _cast:
                v, had_f64 = v.to(_F32), True
            elif d is _I64 and _wide and v.ndim != 0 and _I64 in _cast and _is_wide(v):
                v = _wrap_i64(v)
            elif d is _C128 and complex_too and v.ndim != 0:
                v, had_c128 = v.to(_C64), True
        elif isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
            inner, f, c = cast_inputs(list(v), complex_too)
            v, had_f64, had_c128 = type(v)(inner), had_f64 or f, had_c128 or c
        out.append(v)
    return out, had_f64, had_c128


def restore(out, had_f64: bool, had_c128: bool, wrap_int64: bool = True):
    """Outputs as the user sees them: float32 -> float64 / complex64 -> complex128 where such an input was cast;
    int64 outputs wrapped to int32 range (computed as int32 on the device) when ``wrap_int64``."""
    if isinstance(out, torch.Tensor):
        d = out.dtype
        if d is _I64 and wrap_int64 and _I64 in _cast:
            return _wrap_i64(out)
        if had_f64 and d is _F32:
            return out.to(_F64)
        if had_c128 and d is _C64:
            return out.to(_C128)
        return out
    if isinstance(out, (list, tuple)):
        return type(out)(restore(o, had_f64, had_c128, wrap_int64) for o in out)
    return out


def settle_written(t: torch.Tensor) -> None:
    """A 64-bit tensor an op wrote in place: round float64 to float32 precision, wrap int64 to int32 range."""
    if t.dtype is _F64 and _F64 in _cast:
        t.copy_(t.to(_F32))
    elif t.dtype is _I64 and _I64 in _cast:
        t.copy_(t.to(_I32))
