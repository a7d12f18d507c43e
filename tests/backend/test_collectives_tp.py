"""Tensor parallel (``parallelize_module`` with ColwiseParallel / RowwiseParallel) over two ``neuron`` ranks: the
forward output and the gradients of a tiny MLP against the unsharded model on the CPU.
"""

from __future__ import annotations

import torch
from rank_programs import batch, mlp
from torch import nn
from two_ranks import facet, shared_run

import neuron_backend

# fp32, exact device matmuls: the row-parallel layer sums two partial products with an all-reduce where the CPU
# sums one full product, a few float32 ulps apart; 1e-5 relative with a 1e-6 floor for values near zero.
RTOL, ATOL = 1e-5, 1e-6


def test_tp_forward_and_gradients_match_cpu():
    model = mlp(4)
    x, y = batch()
    out = model(x)
    nn.functional.mse_loss(out, y).backward()
    for res in facet(shared_run(), "tp"):
        # the weights really are split: column-parallel rows and row-parallel columns halve
        assert res["local_weight_shapes"] == {"0.weight": (8, 8), "0.bias": (8,), "2.weight": (4, 8), "2.bias": (4,)}
        torch.testing.assert_close(res["out"], out.detach(), rtol=RTOL, atol=ATOL)
        for name, p in model.named_parameters():
            torch.testing.assert_close(res["grads"][name], p.grad, rtol=RTOL, atol=ATOL, msg=name)


def test_tp_needs_no_cpu_fallback():
    """DTensor's sharding and the collectives run on the device: only ops the profile itself puts on the CPU may
    fall back (the loss, aten::mse_loss, has no Neuron kernel in trn2's source registrations)."""
    run = shared_run()
    facet(run, "tp")
    prof = neuron_backend.policy.active()
    for r in run.results:
        ops = [entry.split(" ")[0] for entry in r["fallback_ops"]["tp"]]
        assert all(prof.classification(op) == "cpu_fallback" for op in ops), ops
        assert not any(op.startswith(("c10d", "_c10d_functional", "_dtensor")) for op in ops), ops
