"""The ops the Neuron compiler auto-casts to bfloat16 by default (``--auto-cast matmult``: the TensorEngine's
matrix-multiply family) and which of their operands it rounds; data, read by numerics.py, policy.py and dispatch.py.
"""

from __future__ import annotations

# The matrix-multiply family that the Neuron compiler auto-casts (TensorEngine ops); positions of the operands.
MATMUL_OPERANDS: dict[str, tuple[int, ...]] = {
    "aten::mm": (0, 1),
    "aten::bmm": (0, 1),
    "aten::addmm": (1, 2),
    "aten::baddbmm": (1, 2),
    "aten::addbmm": (1, 2),
    "aten::matmul": (0, 1),
    "aten::linear": (0, 1),
    # fused attention: Q, K and V enter the TensorEngine as bf16; softmax and accumulation stay fp32
    "aten::scaled_dot_product_attention": (0, 1, 2),
    "aten::convolution": (0, 1),
    "aten::_convolution": (0, 1),
    "aten::dot": (0, 1),
    "aten::vdot": (0, 1),
    "aten::mv": (0, 1),
    "aten::addmv": (1, 2),
}
