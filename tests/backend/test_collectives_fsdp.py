"""FSDP2 (``fully_shard``) over two ``neuron`` ranks: one AdamW step of a tiny MLP, each rank on half the batch,
against the same step taken by one CPU process on the whole batch.
"""

from __future__ import annotations

import torch
from rank_programs import batch, mlp
from torch import nn
from two_ranks import facet, shared_run

# fp32 with exact device matmuls (NEURON_AUTOCAST_MATMUL=0 in the ranks): the step differs from the CPU's only in
# summation order (two half-batch gradients averaged by the reduce-scatter instead of one whole-batch gradient), a
# few float32 ulps. AdamW's first step divides each gradient by its own magnitude, so relative errors carry over
# to the update unchanged: 1e-5 relative (about 100 ulps) with a 1e-6 floor for values near zero.
RTOL, ATOL = 1e-5, 1e-6
COLLECTIVE_NAMESPACES = ("c10d::", "_c10d_functional::", "fsdp::", "_dtensor::")


def _cpu_step() -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    model = mlp(4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = batch()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    opt.step()
    return loss.detach(), grads, {n: p.detach().clone() for n, p in model.named_parameters()}


def test_fsdp_step_matches_a_single_process_cpu_step():
    ranks = facet(shared_run(), "fsdp")
    loss, grads, params = _cpu_step()
    assert all(r["param_type"] == "DTensor" for r in ranks)  # fully_shard really sharded the parameters
    # the mean of the two half-batch losses is the whole-batch mean loss
    torch.testing.assert_close(sum(r["local_loss"] for r in ranks) / 2, loss, rtol=RTOL, atol=ATOL)
    for res in ranks:
        for name in params:
            torch.testing.assert_close(res["grads"][name], grads[name], rtol=RTOL, atol=ATOL, msg=name)
            torch.testing.assert_close(res["params"][name], params[name], rtol=RTOL, atol=ATOL, msg=name)


def test_fsdp_step_changed_the_weights():
    # guards the comparison above against a step that never happened on either side
    ranks = facet(shared_run(), "fsdp")
    initial = dict(mlp(4).named_parameters())
    for res in ranks:
        assert all(not torch.equal(res["params"][n], initial[n].detach()) for n in initial)


def test_no_collective_falls_back_to_the_cpu():
    # The optimizer's _foreach_* ops may fall back while the active op table lacks them (a profile matter); FSDP2's
    # collectives and copy-in/out ops must not.
    run = shared_run()
    facet(run, "fsdp")
    for res in run.results:
        assert not [op for op in res["fallback_ops"]["fsdp"] if op.startswith(COLLECTIVE_NAMESPACES)]
