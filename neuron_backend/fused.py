"""Fused device kernels for hot composite ops (linear, scaled_dot_product_attention) when no gradient is recorded.

PyTorch splits these into 4-14 aten ops above the device; a Neuron compiler runs each as one kernel, and every op
the simulation avoids saves one Python dispatch. With autograd recording, the composite lowering runs unchanged.
"""

from __future__ import annotations

import torch

from neuron_backend import attention, dispatch

aten = torch.ops.aten
FUSED_OPS = (aten.linear.default, aten.scaled_dot_product_attention.default)

_LIB: torch.library.Library | None = None


def _needs_grad(args) -> bool:
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def _by_device(func):
    def run(args, kwargs):
        return dispatch.dispatch(func, args, kwargs)

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
    _LIB = lib
