"""Fused device kernels for hot composite ops (linear, scaled_dot_product_attention) when no gradient is recorded.

PyTorch splits these into 4-14 aten ops above the device; a Neuron compiler runs each as one kernel, and every op
the simulation avoids saves one Python dispatch. With autograd recording, the composite lowering runs unchanged.
"""

from __future__ import annotations

import torch

from neuron_backend import attention
from neuron_backend.tensor import _C

aten = torch.ops.aten
# aten::linear's fused kernel is the C++ core's (csrc/kernels.cpp, fused_linear); SDPA's stays here (attention.py's replay).
FUSED_OPS = (aten.scaled_dot_product_attention.default,)
# Every key below autograd and ADInplaceOrView (Python for fake tensors while tracing, the backend).
_BELOW_AUTOGRAD = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.ADInplaceOrView)

_LIB: torch.library.Library | None = None


def _needs_grad(args) -> bool:
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def _by_device(func):
    def run(args, kwargs):
        # The device's kernel for the op (csrc/decisions.cpp; register() routes these composites to it): decided and run
        # as one device op, natively in C++ where the decision allows. Fake tensors (tracing) reach their mode.
        keys = torch._C._dispatch_keys(args[0])
        for a in args[1:]:
            if isinstance(a, torch.Tensor):
                keys = keys | torch._C._dispatch_keys(a)
        return func.redispatch(keys & _BELOW_AUTOGRAD, *args, **kwargs)

    return run


def _kernel(func):
    by_device = _by_device(func)

    def kernel(*args, **kwargs):
        if _needs_grad(args):
            return func.decompose(*args, **kwargs)
        # One device op, decided against the op table like any other (decomposed if the profile lacks it).
        return by_device(args, kwargs)

    def sdpa_kernel(*args, **kwargs):
        if _needs_grad(args):
            return func.decompose(*args, **kwargs)
        # Composite on the device: its math lowering, replayed on the host data once vouched for (attention.py).
        return attention.sdpa(args, kwargs, by_device)

    return sdpa_kernel if func is attention.SDPA else kernel


def register() -> None:
    """Register the fused kernels on the AutogradPrivateUse1 key, ahead of the composite kernels (once)."""
    global _LIB
    if _LIB is not None:
        return
    lib = torch.library.Library("aten", "IMPL")
    for func in FUSED_OPS:
        lib.impl(func._schema.name.removeprefix("aten::"), _kernel(func), "AutogradPrivateUse1")
    _C.cover([func.name() for func in (aten.linear.default, *FUSED_OPS)])
    _LIB = lib
