"""Compiler-style numerics: float32 matmuls run with bfloat16 inputs and float32 accumulation; int64 wraps to int32.

Mirrors neuronx-cc's default ``--auto-cast matmult`` (bf16) and its 64-bit-to-32-bit integer lowering; which ops
are auto-cast is the hardware model's table (hardware/matmul_autocast.py).
"""

from __future__ import annotations

import torch

from neuron_backend.config import CONFIG
from neuron_backend.hardware.matmul_autocast import MATMUL_OPERANDS

aten = torch.ops.aten
_F32 = torch.float32
_I64 = torch.int64
_I32 = torch.int32


def policy() -> str:
    """The numerics the device applies now: "bf16_matmul" (compiler default) or "fp32" (exact)."""
    return "bf16_matmul" if CONFIG.autocast_matmul else "fp32"


def _round_bf16(t):
    if isinstance(t, torch.Tensor) and t.dtype is _F32:
        # .bfloat16().float() is the same cast as .to(bfloat16).to(float32) without Tensor.to's overload parsing
        # (~1 us less per operand on this per-op path).
        return t.bfloat16().float()
    return t


# id(op) -> its operand positions: the name lookup runs once per op, not once per call.
_operands: dict[int, tuple[int, ...]] = {}


def matmul(func, args: list, kwargs: dict):
    """Run a float32 matmul-family op as the compiler would: operands rounded to bf16, product accumulated in fp32.

    Rounding the operands and multiplying in fp32 is exactly "bf16 inputs, fp32 accumulation": every bf16*bf16
    product is representable in fp32, so only the accumulation order differs from the hardware.
    """
    positions = _operands.get(id(func))
    if positions is None:
        positions = _operands[id(func)] = MATMUL_OPERANDS.get(func._schema.name, (0, 1))
    args = list(args)
    n = len(args)
    for i in positions:
        if i < n:
            args[i] = _round_bf16(args[i])
    return func._op(*args, **kwargs)  # OpOverload._op: one Python frame less than OpOverload.__call__


def int64_wrap(out):
    """Int64 values live on the device as int32 (neuronx-cc lowers 64-bit integers to 32 bits): wrap silently."""
    if isinstance(out, torch.Tensor) and out.dtype is _I64 and out.numel():
        return out.to(_I32).to(_I64)
    return out


def materialize(t: torch.Tensor) -> torch.Tensor:
    """``t`` without a lazy conjugate/negative bit: a plain tensor holding the values the bit stands for.

    Why: device ops run their host kernels inside ``__torch_dispatch__``, where PyTorch excludes the Conjugate and
    Negative dispatch keys, so a later host kernel would read the raw storage and silently drop the bit (complex
    multiply's backward multiplies by ``grad * other.conj()``: Llama4's rotary gradients came out with the
    conjugate lost). A real backend gets such inputs materialized by the dispatcher; here the bit never reaches the
    device. The cost: a conjugate/negative view on the device is a copy, so a later write to its base is not seen
    through it (autograd reads, never writes, these views).
    """
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return t


def host_result(out):
    """A CPU-fallback result the device cannot hold (float64, complex) comes back as float32 / stays on the host;
    one with a lazy conjugate/negative bit is materialized (see ``materialize``)."""
    if isinstance(out, torch.Tensor):
        if out.dtype is torch.float64:
            return out.to(_F32)
        return materialize(out)
    if isinstance(out, (list, tuple)):
        return type(out)(materialize(o) if isinstance(o, torch.Tensor) else o for o in out)
    return out
