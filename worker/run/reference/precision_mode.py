"""The CPU emulation of the device's numerics policy: matmul operands rounded to bf16 with fp32 accumulation
(``Bf16MatmulMode``), entered for the policy-precision references (``policy_mode``).
"""

from __future__ import annotations

import contextlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from worker.judge import judge

# neuronx-cc's default `--auto-cast matmult`: TensorEngine (matrix-multiply family) ops take bf16 operands and
# accumulate in fp32. Op -> positions of its two operands.
MATMUL_OPERANDS: dict[str, tuple[int, int]] = {
    "aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::addmm": (1, 2), "aten::baddbmm": (1, 2),
    "aten::addbmm": (1, 2), "aten::matmul": (0, 1), "aten::linear": (0, 1), "aten::convolution": (0, 1),
    "aten::_convolution": (0, 1), "aten::dot": (0, 1), "aten::mv": (0, 1), "aten::addmv": (1, 2),
}


class Bf16MatmulMode(TorchDispatchMode):
    """CPU emulation of the ``bf16_matmul`` policy: fp32 matmul operands rounded to bf16, product in fp32.

    Rounding operands then multiplying in fp32 is exactly "bf16 inputs, fp32 accumulation" (a bf16*bf16 product is
    exact in fp32), so the reference carries the same rounding the policy allows and no more; outputs stay fp32,
    unlike CPU autocast, whose bf16 outputs break models that mix dtypes (index_add, scatter).
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        pos = MATMUL_OPERANDS.get(func._schema.name)
        if pos is not None:
            args = list(args)
            for i in pos:
                if i < len(args) and isinstance(args[i], torch.Tensor) and args[i].dtype == torch.float32:
                    args[i] = args[i].to(torch.bfloat16).to(torch.float32)
        return func(*args, **(kwargs or {}))


def policy_mode(policy: str) -> contextlib.AbstractContextManager:
    """The CPU emulation of ``policy`` (nothing for fp32): run the reference under it to match the device's rounding."""
    return _policy_mode(policy)


def _policy_mode(policy: str) -> contextlib.AbstractContextManager:
    if policy not in judge.REDUCED_POLICIES:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    # The math SDPA backend spells attention as bmm/baddbmm, so its matmuls are rounded like every other one.
    stack.enter_context(sdpa_kernel(SDPBackend.MATH))
    stack.enter_context(Bf16MatmulMode())
    return stack
