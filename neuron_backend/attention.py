"""``scaled_dot_product_attention`` decided composite, run as its math lowering directly on the host data.

Replays the lowering's ops one by one, as the device runs them, once the op-by-op run has vouched for it (see below).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import torch

from neuron_backend import dispatch, memory, numerics, policy
from neuron_backend.tensor import _C, host, wrap

# Why this exists: the trn2 profile classes aten::scaled_dot_product_attention composite (torch-neuronx registers no
# kernel for it; profile source pytorch-dispatcher), so PyTorch's math lowering runs on the device: 38 device ops per
# call, ~1 ms through the Python tensor subclass, a quarter of a tiny Llama's forward (bench/README.md, "Issue 20
# item 3"). The ops, their order, their decisions and their numerics are the device's; only the subclass round trip
# per op is what this path saves. It runs the same aten ops on the host data (bf16 operand rounding on the matmuls
# where the device decides MATMUL, each new storage accounted in device memory in the same order).
#
# How it stays the device's behaviour: a plan per structure (dtypes, mask kind, causal, GQA repeat, rank) is accepted
# only after one call ran op by op through the device dispatcher (deciding, recording executed ops, raising or
# falling back as the device does) and this replay, run on the same inputs, issued the same (op, dtypes) sequence,
# every one of them decided native or bf16-matmul (or decomposed, for the lowering's own composites), and gave a
# bitwise-equal result. Anything else (a fallback, an unsupported op, another lowering in a newer torch, a reshape
# that would copy) keeps that structure on the op-by-op path. The lowering's source:
# aten/src/ATen/native/transformers/attention.cpp (scaled_dot_product_attention: a boolean mask becomes
# where(mask, 0, -inf); SDPBackend::math for a device without a fused choice; _scaled_dot_product_attention_math:
# q and k scaled by sqrt(scale), the causal mask from ones().tril(), GQA by repeat_interleave, matmul, add,
# _safe_softmax, matmul) as observed op by op on torch 2.13.0 (tests/backend/test_attention.py).

aten = torch.ops.aten
SDPA = aten.scaled_dot_product_attention.default
_NATIVE, _MATMUL, _DECOMPOSE, _COMPOSITE = policy.NATIVE, policy.MATMUL, policy.DECOMPOSE, policy.COMPOSITE
_LEAVES_OK = (_NATIVE, _MATMUL)
# The lowering's own composites, decomposed on the device into the leaves that follow them in the sequence.
_PARENTS = {id(aten._unsafe_view.default), id(aten._safe_softmax.default), id(aten.zeros_like.default)}
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
_Tensor = torch.Tensor
_account = _C.account  # a replayed temporary is device memory until its host storage dies

# structure key -> whether the bmm operands are rounded (the plan is accepted), or None (op by op for this structure)
_plans: dict[tuple, bool | None] = {}


class _Copy(Exception):
    """A reshape in the lowering's matmul would copy (not a view): the op-by-op path handles that layout."""


class _Run:
    """Runs the replay's ops: fast (run and account memory) or checking (also records the sequence, no accounting)."""

    def __init__(self, core: int, round_bmm: bool, seen: list | None = None) -> None:
        self.core = core
        self.round_bmm = round_bmm
        self.seen = seen

    def __call__(self, func, *args, **kwargs):
        if self.seen is not None:
            self.seen.append((func, _key_dtypes(args, kwargs, _is_host)))
        if func is aten.bmm.default and self.round_bmm:
            out = numerics.matmul(func, args, kwargs)
        else:
            out = func._op(*args, **kwargs)
        if self.seen is None and isinstance(out, _Tensor):
            _account(out, self.core)
        return out

    def note(self, func, *args) -> None:
        """A composite the device decomposes: in the sequence, not run itself."""
        if self.seen is not None:
            self.seen.append((func, _key_dtypes(args, {}, _is_host)))

    def empty(self, size, dtype: torch.dtype) -> torch.Tensor:
        """A factory on the device (the factory kernel checks the allocation fits, then accounts it)."""
        if self.seen is None:
            memory.check_fits(math.prod(size) * dtype.itemsize, self.core)
        out = torch.empty(size, dtype=dtype)
        if self.seen is None:
            _account(out, self.core)
        return out

    def full(self, size, value: float, dtype: torch.dtype) -> torch.Tensor:
        return self(aten.fill_.Scalar, self.empty(size, dtype), value)


def _is_host(t) -> bool:
    return isinstance(t, _Tensor)


def _is_device(t) -> bool:
    return isinstance(t, _Tensor) and _C.is_device(t)  # a fake neuron tensor (tracing) is not replayed


def _key_dtypes(args, kwargs, kind) -> tuple:
    """The dtypes the device keys its decision on, as dispatch.dispatch collects them: tensor arguments (in lists
    too), tensor keyword arguments, then a requested ``dtype``."""
    out = []
    for a in args:
        if kind(a):
            out.append(a.dtype)
        elif type(a) is list or type(a) is tuple:
            out.extend(x.dtype for x in a if kind(x))
    for v in kwargs.values():
        if kind(v):
            out.append(v.dtype)
        elif (type(v) is list or type(v) is tuple) and v and kind(v[0]):
            out.extend(x.dtype for x in v)
    dt = kwargs.get("dtype")
    if type(dt) is torch.dtype:
        out.append(dt)
    return tuple(out)


def _view(run: _Run, t, shape):
    """``reshape`` as ATen runs it on a device tensor: ``view`` when contiguous, else ``_reshape_alias`` with the
    strides a view would have (aten/src/ATen/native/TensorShape.cpp, reshape_symint: a tensor subclass got ``view``
    instead, so the wrapper-subclass device saw only views)."""
    try:
        if t.is_contiguous():
            return run(aten.view.default, t, shape)
        return run(aten._reshape_alias.default, t, shape, list(t.view(shape).stride()))
    except RuntimeError as e:  # reshape would copy here: not the sequence this replay knows
        raise _Copy from e


def _matmul(run: _Run, a, b):
    """torch.matmul of two 4-d tensors as the device receives it: expand, view to 3-d, bmm, _unsafe_view."""
    batch = list(a.shape[:-2])
    n = math.prod(batch)
    a3 = _view(run, run(aten.expand.default, a, list(a.shape)), [n, a.shape[-2], a.shape[-1]])
    b3 = _view(run, run(aten.expand.default, b, list(b.shape)), [n, b.shape[-2], b.shape[-1]])
    out = run(aten.bmm.default, a3, b3)
    shape = [*batch, a.shape[-2], b.shape[-1]]
    run.note(aten._unsafe_view.default, out)
    return _view(run, out, shape)


def _repeat_kv(run: _Run, t, n: int):
    """repeat_interleave over the head dimension, as the lowering does it for GQA."""
    e = run(aten.expand.default, run(aten.unsqueeze.default, t, 2),
            [t.shape[0], t.shape[1], n, t.shape[2], t.shape[3]])
    c = run(aten.clone.default, e, memory_format=torch.contiguous_format)
    return _view(run, c, [t.shape[0], t.shape[1] * n, t.shape[2], t.shape[3]])


def _bool_mask(run: _Run, mask, dtype: torch.dtype):
    neg = run.full([], -math.inf, dtype)
    zero = run.full([], 0.0, dtype)
    return run(aten.where.self, mask, zero, neg)


def _lowering(run: _Run, q, k, v, mask, is_causal: bool, scale, gqa: bool):
    """The math lowering, op for op; locals live as long as the C++ lowering's and the Python _safe_softmax
    decomposition's do, so device memory peaks where the op-by-op run's does."""
    if mask is not None and mask.dtype is torch.bool:
        mask = _bool_mask(run, mask, q.dtype)
    s = math.sqrt(scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    q = run(aten.mul.Scalar, q, s)
    if is_causal:
        ones = run.full([q.shape[-2], k.shape[-2]], 1.0, torch.bool)
        tri = run(aten.tril.default, ones)
        del ones  # a temporary of the C++ expression: dies once tril has run
        mask = _bool_mask(run, tri, q.dtype)
        del tri
    if gqa:
        n = q.shape[1] // k.shape[1]
        k = _repeat_kv(run, k, n)
        v = _repeat_kv(run, v, n)
    attn = _matmul(run, q, run(aten.mul.Scalar, run(aten.transpose.int, k, -2, -1), s))
    if mask is not None:
        attn = run(aten.add_.Tensor, attn, mask)  # in place on a plain tensor (attention.cpp, math SDPA)
    run.note(aten._safe_softmax.default, attn)
    out = run(aten._softmax.default, attn, -1, False)  # softmax.int is composite: the device sees _softmax
    masked = run(aten.eq.Scalar, attn, -math.inf)
    rows = run(aten.all.dim, masked, -1, True)
    run.note(aten.zeros_like.default, out)
    zeros = run(aten.full_like.default, out, 0, pin_memory=False, memory_format=torch.preserve_format)
    attn = run(aten.where.self, rows, zeros, out)
    del out, masked, rows, zeros
    return _matmul(run, attn, v)


def nki_sdpa_applies(q_shape, k_shape, v_shape, has_mask: bool, dropout_p: float,
                     gate: dict | None = None) -> bool:
    """Whether real Trn2 runs this SDPA call as its fused NKI flash kernel (the active profile's ``sdpa.fused_gate``,
    from whn09/xpu-perf's reading of torch-neuronx 2.12.3's _can_use_nki_flash_attention); otherwise the device runs
    the math decomposition, which is what this module and the op-by-op path run in both cases. Shapes are
    (B, H, L, E) for q and (B, H, S, E) for k and v. A profile without a gate (legacy-xla) never fuses."""
    if gate is None:
        gate = (policy.active().raw.get("sdpa") or {}).get("fused_gate")
    if not gate or len(q_shape) != 4:
        return False
    b, h, q_len, head_dim = q_shape
    return bool((not gate["same_kv_shape"] or tuple(k_shape) == tuple(v_shape)) and not has_mask
                and dropout_p == gate["dropout_p"] and q_len % gate["q_len_multiple"] == 0
                and k_shape[-2] % gate["kv_len_multiple"] == 0 and head_dim <= gate["head_dim_max"]
                and b * h <= gate["batch_heads_max"])


def _parse(args, kwargs):
    """(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa) from the op's arguments."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
    vals = dict(zip(names, args, strict=False))
    vals.update(kwargs)
    return (vals["query"], vals["key"], vals["value"], vals.get("attn_mask"), vals.get("dropout_p", 0.0),
            vals.get("is_causal", False), vals.get("scale"), vals.get("enable_gqa", False))


def _structure(q, k, v, mask, dropout_p, is_causal, scale, gqa) -> tuple | None:
    """The plan key, or None when the replay does not apply (other ranks, dropout, other dtypes, mixed cores,
    tracing or meta data)."""
    if dropout_p or (scale is not None and scale < 0):
        return None
    if not (_is_device(q) and _is_device(k) and _is_device(v)):
        return None
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.dtype not in _FLOATS or not (q.dtype == k.dtype == v.dtype):
        return None
    if q.device != k.device or q.device != v.device:
        return None
    mask_kind = None
    if mask is not None:
        if not _is_device(mask) or mask.device != q.device or mask.dtype not in (torch.bool, q.dtype):
            return None
        mask_kind = (mask.dtype, mask.dim())
    repeat = bool(gqa) and q.shape[1] != k.shape[1]
    return q.dtype, mask_kind, bool(is_causal), repeat


def sdpa(args, kwargs, by_device: Callable):
    """The fused kernel's SDPA: the replay when the device decides it composite and the plan holds, else
    ``by_device(args, kwargs)`` (the device dispatcher, op by op)."""
    q, k, v, mask, dropout_p, is_causal, scale, gqa = parsed = _parse(args, kwargs)
    key = _structure(*parsed)
    if key is None:
        return by_device(args, kwargs)
    dtypes = [q.dtype, k.dtype, v.dtype] + ([mask.dtype] if mask is not None else [])
    if dispatch.decision_of(SDPA, dtypes) != _COMPOSITE:
        return by_device(args, kwargs)
    plan = _plans.get(key, False)
    if plan is None:
        return by_device(args, kwargs)
    if plan is False:  # first call of this structure: op by op, recorded, then vouch for the replay
        seen: list = []
        with recording(seen):
            out = by_device(args, kwargs)
        _plans[key] = _vouch(seen, out, q, k, v, mask, is_causal, scale, key[3])
        return out
    m = host(mask) if mask is not None else None
    core = q.device.index
    # The accepted plan runs in C++ (csrc/replay.cpp replay_sdpa: the same ops as _lowering, in the same order).
    out = _C.replay_sdpa(host(q), host(k), host(v), m, bool(is_causal), scale, key[3], bool(plan), core)
    if out is None:  # a reshape would copy here
        return by_device(args, kwargs)
    return wrap(out, core)


@contextlib.contextmanager
def recording(into: list) -> Iterator[None]:
    """Record (op, dtypes of its decision key) of every op that reaches the device's kernel (the C++ fast path is
    off meanwhile, so every op passes through dispatch.dispatch)."""
    def recorder(func, args, kwargs):
        into.append((func, _key_dtypes(args, kwargs or {}, _is_device)))

    with dispatch.observing(recorder):
        yield


def _vouch(seen: list, out, q, k, v, mask, is_causal, scale, repeat) -> bool | None:
    """Whether the replay may stand in for this structure: None, or whether the bmm operands are rounded."""
    seen = [(f, d) for f, d in seen if f is not SDPA]
    decisions = [dispatch.decided(f, d) for f, d in seen]
    if any(d not in _LEAVES_OK and not (d in (_DECOMPOSE, _COMPOSITE) and id(f) in _PARENTS)
           for (f, _), d in zip(seen, decisions, strict=True)):
        return None
    round_bmm = any(f is aten.bmm.default and d == _MATMUL for (f, _), d in zip(seen, decisions, strict=True))
    replayed: list = []
    m = host(mask) if mask is not None else None
    try:
        result = _lowering(_Run(q.device.index, round_bmm, replayed), host(q), host(k), host(v), m, is_causal, scale,
                           repeat)
    except _Copy:
        return None
    if replayed != seen or not _is_device(out) or not torch.equal(result, host(out)):
        return None
    return round_bmm


def clear() -> None:
    """Forget the plans (dispatch.clear_cache: the profile or the settings changed, so may the decisions)."""
    _plans.clear()


dispatch.on_clear(clear)
