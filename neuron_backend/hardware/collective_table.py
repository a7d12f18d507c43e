"""What the real torch-neuronx process group implements: its collectives, the ones it lacks and its reduce ops; data
with its source, read by neuron_backend/collectives.py and collective_ops.py (which raise the typed error).

Source: the public pre-beta torch-neuronx snapshot (indicative, not the release), see SOURCE.
"""

from __future__ import annotations

SOURCE = (
    "github.com/parmoham-aws/test-repo-parmoham@98154b867aa24562a3213e520d9ad7fd41032291 "
    "torch_neuronx/distributed/backend.py (pre-beta snapshot, 2026-04-21; indicative, not the release)"
)

# c10d op -> how the real ProcessGroupNeuron runs it (backend.py at SOURCE). Its four device collectives are the
# XLA ops AllReduceOp, AllGatherOp, ReduceScatterOp and AllToAllOp (torch_neuronx/distributed/ops/); barrier is
# the runtime's nrt_barrier. The one functional collective it registers for PrivateUse1 is listed last
# (torch_neuronx/distributed/ops/functional_collectives.py); the others reach the group through PyTorch's own kernels.
NATIVE_COLLECTIVES: dict[str, str] = {
    "c10d::allreduce_": "ProcessGroupNeuron.allreduce: AllReduceOp",
    "c10d::allreduce_coalesced_": "allreduce_coalesced: one AllReduceOp over the non-empty tensors",
    "c10d::allgather_": "allgather: AllGatherOp (split into buckets above COLLECTIVE_BUCKETSIZE_IN_MB, default 512)",
    "c10d::_allgather_base_": "_allgather_base: AllGatherOp into one output tensor",
    "c10d::allgather_coalesced_": "allgather_coalesced: AllGatherOp",
    "c10d::allgather_into_tensor_coalesced_": "allgather_into_tensor_coalesced: AllGatherOp",
    "c10d::reduce_scatter_": "reduce_scatter: ReduceScatterOp",
    "c10d::_reduce_scatter_base_": "_reduce_scatter_base: ReduceScatterOp",
    "c10d::reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor_coalesced: one ReduceScatterOp on interleaved chunks",
    "c10d::broadcast_": "broadcast: AllReduceOp SUM after the non-root ranks zero their tensor",
    "c10d::reduce_": "reduce: AllReduceOp, into temporaries on the non-root ranks",
    "c10d::gather_": "gather: AllGatherOp",
    "c10d::scatter_": "scatter: reduce_scatter SUM, the non-root ranks contributing zeros",
    "c10d::alltoall_": "alltoall: AllToAllOp",
    "c10d::alltoall_base_": "alltoall_base: alltoall; only even splits (none, or all ones)",
    "c10d::barrier": "barrier: nrt_barrier; default (world) group only",
    "_c10d_functional::all_gather_into_tensor_out": "registered for PrivateUse1: calls the group's _allgather_base",
}
# c10d op -> why the real backend cannot run it (backend.py at SOURCE).
UNSUPPORTED_COLLECTIVES: dict[str, str] = {
    "c10d::send": "ProcessGroupNeuron defines no send and registers no c10d Backend that could (inferred from backend.py)",
    "c10d::recv_": "ProcessGroupNeuron defines no recv and registers no c10d Backend that could (inferred from backend.py)",
    "c10d::recv_any_source_": "ProcessGroupNeuron.recv_anysource raises NotImplementedError",
    "c10d::monitored_barrier_": "ProcessGroupNeuron.monitored_barrier raises NotImplementedError",
}
# torch_neuronx/distributed/utils.py get_reduce_type at SOURCE: every other op raises ValueError.
REDUCE_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM")
