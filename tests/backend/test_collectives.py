"""The ``neuron`` torch.distributed backend: its registration and data, and each c10d collective on two ranks of
device tensors against the same reduction computed on the CPU, plus the collectives the real backend lacks.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from rank_programs import WORLD, collective_input
from two_ranks import facet, shared_run

from neuron_backend import collectives


def test_backend_is_registered_for_the_neuron_device_only():
    assert dist.Backend("neuron") == "neuron"
    assert dist.Backend.backend_capability["neuron"] == ["neuron"]
    assert dist.Backend.default_device_backend_map["neuron"] == "neuron"
    assert dist.is_backend_available("neuron")


def test_neuron_rendezvous_scheme_refuses_with_the_alternatives():
    with pytest.raises(ValueError, match="env://"):
        next(dist.rendezvous("neuron://127.0.0.1:1", rank=0, world_size=1))


def test_collective_tables_name_real_ops_and_reduce_ops():
    for op in [*collectives.NATIVE_COLLECTIVES, *collectives.UNSUPPORTED_COLLECTIVES]:
        ns, name = op.split("::")
        assert getattr(getattr(torch.ops, ns), name).default._schema.name == op
    assert not set(collectives.NATIVE_COLLECTIVES) & set(collectives.UNSUPPORTED_COLLECTIVES)
    for name in collectives.REDUCE_OPS:
        assert getattr(dist.ReduceOp, name) is not None
    assert "98154b867aa24562a3213e520d9ad7fd41032291" in collectives.SOURCE


def _sum(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return sum(collective_input(r, dtype) for r in range(WORLD))


def test_all_reduce_matches_cpu_for_every_op_tried():
    for res in facet(shared_run(), "collectives"):
        # Small integers and halves: every value is exact in fp32 and bf16, so equality is the right test.
        torch.testing.assert_close(res["all_reduce_sum"], _sum(), rtol=0, atol=0)
        torch.testing.assert_close(res["all_reduce_avg"], _sum() / WORLD, rtol=0, atol=0)
        torch.testing.assert_close(res["all_reduce_premul_half"], _sum() * 0.5, rtol=0, atol=0)
        expected_max = torch.stack([collective_input(r) for r in range(WORLD)]).amax(0)
        torch.testing.assert_close(res["all_reduce_max"], expected_max, rtol=0, atol=0)
        torch.testing.assert_close(res["all_reduce_bf16"], _sum(torch.bfloat16), rtol=0, atol=0)
        # reduced through a transposed (non-contiguous) view: the result lands in the base tensor
        torch.testing.assert_close(res["all_reduce_view"], _sum(), rtol=0, atol=0)


def test_gather_scatter_broadcast_and_all_to_all_match_cpu():
    inputs = [collective_input(r) for r in range(WORLD)]
    for rank, res in enumerate(facet(shared_run(), "collectives")):
        torch.testing.assert_close(res["all_gather_into_tensor"], torch.cat(inputs), rtol=0, atol=0)
        torch.testing.assert_close(res["all_gather"], torch.stack(inputs), rtol=0, atol=0)
        torch.testing.assert_close(res["reduce_scatter_tensor"], _sum().chunk(WORLD)[rank], rtol=0, atol=0)
        torch.testing.assert_close(res["broadcast"], inputs[1], rtol=0, atol=0)
        expected_a2a = torch.cat([inputs[src].chunk(WORLD)[rank] for src in range(WORLD)])
        torch.testing.assert_close(res["all_to_all_single"], expected_a2a, rtol=0, atol=0)


def test_collectives_ran_on_the_device_path_without_cpu_fallback():
    run = shared_run()
    for rank, res in enumerate(facet(run, "collectives")):
        executed = res["executed"]
        for op in ("c10d::allreduce_", "c10d::_allgather_base_", "c10d::allgather_", "c10d::_reduce_scatter_base_",
                   "c10d::broadcast_", "c10d::alltoall_base_"):
            assert executed.get(op, 0) >= 1, (op, executed)
        assert set(executed) <= set(collectives.NATIVE_COLLECTIVES), executed
        assert run.results[rank]["fallback_ops"]["collectives"] == []


def test_collectives_the_real_backend_lacks_raise_its_errors():
    for rank, res in enumerate(facet(shared_run(), "collectives")):
        errors = res["errors"]
        assert errors["send"].startswith("NeuronUnsupportedCollectiveError") and "c10d::send" in errors["send"]
        assert "only even splits" in errors["uneven_all_to_all"]
        if rank == 0:
            assert "default group only" in errors["subgroup_barrier"]


def test_ranks_see_the_backend_and_their_local_core():
    run = shared_run()
    facet(run, "collectives")
    assert [r["backend"] for r in run.results] == ["neuron", "neuron"]
    assert [r["device"] for r in run.results] == ["neuron:0", "neuron:1"]
