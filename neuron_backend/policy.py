"""TEMP stub."""
import torch

NATIVE, MATMUL, INT64_OP, DECOMPOSE, FALLBACK, UNSUPPORTED = range(6)
from neuron_backend.numerics import MATMUL_OPERANDS


def decide(func, dtypes, args, kwargs):
    if func._schema.name in MATMUL_OPERANDS and dtypes and dtypes[0] == torch.float32:
        return MATMUL
    return NATIVE
def check_device_dtype(op, dtype, t):
    pass
