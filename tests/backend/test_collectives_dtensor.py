"""DTensor on a two-rank ``neuron`` device mesh: distribute_tensor, redistributions through all-gather, all-to-all
and all-reduce, and a sharded matmul, each against the same tensor computed whole on the CPU.
"""

from __future__ import annotations

import torch
from rank_programs import WORLD, collective_input
from two_ranks import facet, shared_run

FULL = torch.arange(24, dtype=torch.float32).reshape(4, 6)
W = torch.arange(12, dtype=torch.float32).reshape(6, 2) / 10


def test_distribute_and_redistribute_match_cpu():
    for rank, res in enumerate(facet(shared_run(), "dtensor")):
        assert res["mesh_device"] == "neuron"
        # pure data movement of small integers: exact
        torch.testing.assert_close(res["shard0_local"], FULL.chunk(WORLD, 0)[rank], rtol=0, atol=0)
        torch.testing.assert_close(res["shard0_to_replicate"], FULL, rtol=0, atol=0)
        torch.testing.assert_close(res["shard0_to_shard1"], FULL.chunk(WORLD, 1)[rank], rtol=0, atol=0)
        partial_sum = sum(collective_input(r) for r in range(WORLD))
        torch.testing.assert_close(res["partial_to_replicate"], partial_sum, rtol=0, atol=0)


def test_sharded_matmul_matches_cpu():
    for res in facet(shared_run(), "dtensor"):
        # Each row of the product is computed whole on one rank with the same fp32 kernel (exact device numerics in
        # these runs): the same summation order as the CPU, so only the rounding of W's tenths could differ: none.
        torch.testing.assert_close(res["matmul_full"], FULL @ W, rtol=1e-6, atol=1e-6)


def test_dtensor_needs_no_cpu_fallback():
    run = shared_run()
    facet(run, "dtensor")
    assert [r["fallback_ops"]["dtensor"] for r in run.results] == [[], []]
