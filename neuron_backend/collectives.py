"""Collectives of the simulated device: the ``neuron`` torch.distributed backend (``ProcessGroupNeuron``), one rank
per process on one host, and the routing of c10d, functional-collective and FSDP2 ops that reach device tensors.

It models semantics, not bandwidth: data moves between ranks through a gloo group on the host copies of the device
tensors (``NeuronTensor._data``), and every collective has completed when its call returns (one timeline, as in the
rest of the simulation), so timing, overlap and the real runtime's collective engines are not modelled.

What it copies from the real backend, all from the public pre-beta torch-neuronx source (indicative, not the release):
github.com/parmoham-aws/test-repo-parmoham @ 98154b867aa24562a3213e520d9ad7fd41032291 (see SOURCE):
- the backend name and device list: ``dist.Backend.register_backend("neuron", ..., devices=["neuron"])`` and the
  class name ``ProcessGroupNeuron`` (a Python ``ProcessGroup`` subclass), ``getBackendName() == "neuron"``
  (torch_neuronx/distributed/backend.py);
- the ``neuron`` rendezvous scheme it registers, whose handler there does nothing (backend.py ``rendezvous_handler``);
  here it raises a clear error, since a rendezvous through it cannot succeed;
- which collectives run on the device (NATIVE_COLLECTIVES), which do not (UNSUPPORTED_COLLECTIVES), the reduce
  ops (REDUCE_OPS, torch_neuronx/distributed/utils.py ``get_reduce_type``) and PREMUL_SUM as a pre-scaled SUM
  (utils.py ``parse_and_update_inputs``);
- binding the process to its local rank's NeuronCore when the first group is created (backend.py
  ``_set_rt_visible_cores`` and ``_neuron_runtime_setup``; csrc/core/NeuronDevice.cpp ``set_local_device_start_index``:
  "PyTorch Device ID will always be equal to the local rank of the process").
"""

from __future__ import annotations

import collections
import datetime
import importlib
import os
import threading
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllreduceOptions,
    ProcessGroup,
    ProcessGroupGloo,
    ReduceOp,
    ReduceScatterOptions,
    Work,
)

from neuron_backend import device_module, dispatch
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedOpError
from neuron_backend.tensor import NeuronTensor, wrap

BACKEND = "neuron"
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

_PU1 = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
# Namespaces whose ops on device tensors run on a process group (c10d) or as PyTorch's own kernels written
# against the device (the rest: functional collectives, DTensor's all-to-all, FSDP2's copy-in/out).
_GROUP_NAMESPACES = ("c10d",)
_KERNEL_NAMESPACES = ("_c10d_functional", "_dtensor", "fsdp")
_routed: set[str] = set()
_executed: collections.Counter[str] = collections.Counter()
_lock = threading.Lock()
_state: dict[str, Any] = {"registered": False, "core_bound": False}


class NeuronUnsupportedCollectiveError(NeuronUnsupportedOpError, NotImplementedError):
    """A collective the real ProcessGroupNeuron does not implement (the real one raises NotImplementedError)."""

    def _message(self) -> str:
        return f"The collective '{self.op}' is not implemented by the neuron process group ({self.reason})."


def executed_collectives() -> dict[str, int]:
    """c10d ops this process has run on the device since the last reset, with counts."""
    with _lock:
        return dict(_executed)


def reset_executed_collectives() -> None:
    with _lock:
        _executed.clear()


def _premul_factor(opts) -> Any:
    """PREMUL_SUM's factor, turning ``opts`` into a plain SUM (the real backend pre-scales the inputs likewise)."""
    kind, factor = opts.reduceOp.__getstate__()
    if kind != ReduceOp.PREMUL_SUM:
        return None
    opts.reduceOp = ReduceOp.SUM
    return factor


def _unsupported(op: str, tensors=()) -> NeuronUnsupportedCollectiveError:
    flat = _flat_tensors(tensors)
    return NeuronUnsupportedCollectiveError(
        op, [str(t.dtype).removeprefix("torch.") for t in flat], [tuple(t.shape) for t in flat],
        UNSUPPORTED_COLLECTIVES.get(op, "") + f"; source: {SOURCE}",
    )


def _gloo_options(timeout: datetime.timedelta | None) -> ProcessGroupGloo._Options:
    opts = ProcessGroupGloo._Options()
    opts._timeout = timeout if timeout is not None else datetime.timedelta(minutes=30)
    # One host by construction: loopback, unless the user names an interface as for any gloo group.
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        opts._devices = [ProcessGroupGloo.create_default_device()]
    else:
        opts._devices = [ProcessGroupGloo.create_device(hostname="127.0.0.1")]
    return opts


class ProcessGroupNeuron(ProcessGroup):
    """The ``neuron`` process group: simulated NeuronCores of one host, one rank per process.

    A host gloo group is registered as its backend for the ``neuron`` (and ``cpu``) device types; device tensors
    reach it through the c10d ops (see _run_on_group). Python overrides only where the real class differs from a
    plain group: PREMUL_SUM pre-scaling, barrier on the default group only, no point-to-point, no monitored barrier.
    """

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: datetime.timedelta | None) -> None:
        # ProcessGroup(store, ...) cannot build a Python subclass (pybind alias); the real class also uses (rank, size).
        super().__init__(rank, size)
        self._host_group = ProcessGroupGloo(store, rank, size, _gloo_options(timeout))
        for device in (BACKEND, "cpu"):  # cpu: barrier and object collectives stage their tensors on the host
            self._register_backend(torch.device(device), ProcessGroup.BackendType.CUSTOM, self._host_group)
        self._set_default_backend(ProcessGroup.BackendType.CUSTOM)

    def getBackendName(self) -> str:  # noqa: N802 - c10d's method name
        return BACKEND

    def allreduce(self, tensors, opts=None):
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else tensors
        opts = AllreduceOptions() if opts is None else opts
        factor = _premul_factor(opts)
        if factor is not None:
            for t in tensors:
                t.mul_(factor)  # in place: allreduce overwrites them anyway
        return super().allreduce(tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = dist.AllreduceCoalescedOptions() if opts is None else opts
        factor = _premul_factor(opts)
        if factor is not None:
            for t in tensors:
                t.mul_(factor)
        return super().allreduce_coalesced(tensors, opts)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        opts = ReduceScatterOptions() if opts is None else opts
        factor = _premul_factor(opts)
        if factor is not None:  # copies: the inputs are the caller's and must not change
            input_tensors = [[t * factor for t in inner] for inner in input_tensors]
        return super().reduce_scatter(output_tensors, input_tensors, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = ReduceScatterOptions() if opts is None else opts
        factor = _premul_factor(opts)
        if factor is not None:
            input = input * factor
        return super().reduce_scatter_single(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        opts = ReduceScatterOptions() if opts is None else opts
        factor = _premul_factor(opts)
        if factor is not None:
            inputs = [t * factor for t in inputs]
        return super().reduce_scatter_single_coalesced(outputs, inputs, opts)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced  # the name torch < 2.13 and backend.py use

    def barrier(self, opts=None):
        if self.size() != dist.get_world_size():
            raise NeuronUnsupportedCollectiveError(
                "c10d::barrier", [], [], f"barrier is implemented for the default group only; source: {SOURCE}"
            )
        return super().barrier() if opts is None else super().barrier(opts)

    def send(self, tensors, *args):
        raise _unsupported("c10d::send", tensors)

    def recv(self, tensors, *args):
        raise _unsupported("c10d::recv_", tensors)

    def recv_anysource(self, tensors, *args):
        raise _unsupported("c10d::recv_any_source_", tensors)

    def monitored_barrier(self, *args, **kwargs):
        raise _unsupported("c10d::monitored_barrier_")


def _to_host(x, originals: dict[int, NeuronTensor], staged: list[tuple[torch.Tensor, torch.Tensor]]):
    t = type(x)
    if t is NeuronTensor:
        data = x._data
        if not data.is_contiguous():  # gloo needs dense buffers; results are copied back into the view after
            dense = data.contiguous()
            staged.append((data, dense))
            data = dense
        originals[id(data)] = x
        return data
    if t is list or t is tuple:
        return t(_to_host(y, originals, staged) for y in x)
    return x


def _to_device(x, originals: dict[int, NeuronTensor], core: int):
    if isinstance(x, torch.Tensor):
        original = originals.get(id(x))
        return wrap(x, core) if original is None else original
    if type(x) is list or type(x) is tuple:
        return type(x)(_to_device(y, originals, core) for y in x)
    return x


def _wait_all(out) -> None:
    """Complete the collective before returning: the simulation keeps one timeline (see the module docstring)."""
    if isinstance(out, torch.ScriptObject) and "c10d.Work" in out._type().qualified_name():
        Work.unbox(out).wait()
    elif type(out) is list or type(out) is tuple:
        for o in out:
            _wait_all(o)


def _check_supported(name: str, args) -> None:
    if name in UNSUPPORTED_COLLECTIVES:
        raise _unsupported(name, args[:1])
    if name == "c10d::alltoall_base_":
        for splits in (args[3], args[4]):
            if splits and any(s != 1 for s in splits):
                raise NeuronUnsupportedCollectiveError(
                    name, [str(args[1].dtype).removeprefix("torch.")], [tuple(args[1].shape)],
                    f"only even splits (none, or all ones) are supported, got {list(splits)}; source: {SOURCE}",
                )
    elif name in ("c10d::allgather_", "c10d::allgather_into_tensor_coalesced_"):
        empty = [tuple(t.shape) for t in _flat_tensors(args[:2]) if t.dim() > 0 and t.size(0) == 0]
        if empty:  # backend.py _validate_no_zero_dim0 raises ValueError
            raise ValueError(f"tensors cannot have zero size in dimension 0, found: {empty} ({name} on neuron)")


def _flat_tensors(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if type(x) is list or type(x) is tuple:
        return [t for y in x for t in _flat_tensors(y)]
    return []


def _reduce_op_of(args) -> int | None:
    for a in args:
        if isinstance(a, torch.ScriptObject) and a._type().qualified_name().endswith("c10d.ReduceOp"):
            return int(a.op())
    return None


def _run_on_group(func, args, kwargs):
    """A c10d op on device tensors: its PrivateUse1 kernel, run on the tensors' host data, reaches the group's
    backend for the neuron device type (the host gloo group); the op has completed when this returns."""
    name = func._schema.name
    _check_supported(name, args)
    if _reduce_op_of(args) == int(ReduceOp.PREMUL_SUM):
        raise NotImplementedError(
            f"{name} with PREMUL_SUM reached the simulated device without its factor (only the Python API paths "
            "pre-scale it): a limit of the simulation, not of the device, which supports PREMUL_SUM"
        )
    originals: dict[int, NeuronTensor] = {}
    staged: list[tuple[torch.Tensor, torch.Tensor]] = []
    host_args = _to_host(args, originals, staged)
    host_kwargs = {k: _to_host(v, originals, staged) for k, v in kwargs.items()}
    try:
        out = func.redispatch(_PU1, *host_args, **host_kwargs)
        _wait_all(out)
    except Exception as exc:
        exc.add_note(f"while running {name} on the neuron device (simulated collective over the host gloo group)")
        if not hasattr(exc, "neuron_collective"):
            exc.neuron_collective = name
        raise
    for view, dense in staged:
        view.copy_(dense)
    with _lock:
        _executed[name] += 1
    core = next(iter(originals.values()))._core if originals else device_module.current_device()
    return _to_device(out, originals, core)


def _run_device_kernel(func, args, kwargs):
    """An op whose kernel PyTorch writes against the device (PrivateUse1, or CompositeExplicitAutograd): run that
    kernel on the device tensors themselves, so its inner ops are device ops and its collectives reach the group."""
    return func.redispatch(_PU1, *args, **kwargs)


def route_ops() -> None:
    """Route every c10d / functional-collective / DTensor / FSDP2 op defined so far (new ones appear on import)."""
    for full in torch._C._dispatch_get_all_op_names():
        ns, _, rest = full.partition("::")
        if ns not in _GROUP_NAMESPACES and ns not in _KERNEL_NAMESPACES:
            continue
        packet_name = rest.split(".")[0]
        if f"{ns}::{packet_name}" in _routed:
            continue
        _routed.add(f"{ns}::{packet_name}")
        packet = getattr(getattr(torch.ops, ns), packet_name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if ns in _GROUP_NAMESPACES:
                if op._schema.name in UNSUPPORTED_COLLECTIVES or _has_kernel(op, "PrivateUse1"):
                    dispatch.register_special(op, _run_on_group)
            elif _has_kernel(op, "PrivateUse1") or _has_kernel(op, "CompositeExplicitAutograd"):
                dispatch.register_special(op, _run_device_kernel)


def _has_kernel(op, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)


def _bind_local_core(rank: int, size: int) -> None:
    """Make the local rank's NeuronCore current, as the real backend does when the first group is created."""
    if os.environ.get("LOCAL_RANK") is not None and os.environ.get("LOCAL_WORLD_SIZE") is not None:
        local_rank = int(os.environ["LOCAL_RANK"])
    else:
        local_rank = rank  # the simulation is one host: every rank is local
    if not 0 <= local_rank < CONFIG.cores:
        raise RuntimeError(
            f"rank {rank} of {size}: its local rank {local_rank} needs NeuronCore neuron:{local_rank}, but this "
            f"simulated host has {CONFIG.cores} (NEURON_CORES); the real backend binds each process to its local "
            "rank's core"
        )
    device_module.set_device(local_rank)
    # torch 2.13's Python device guard reports one device (torch/csrc/acc/Module.cpp, PythonDeviceGuard::deviceCount
    # returns 1), so the autograd engine keeps one device queue and backward on neuron:N, N > 0, fails an internal
    # assert. With autograd multithreading off (a per-thread setting) backward runs in the calling thread instead,
    # on every rank alike; gradients are the same.
    torch.autograd.set_multithreading_enabled(False)


def _create_process_group(store: dist.Store, rank: int, size: int, timeout) -> ProcessGroupNeuron:
    if not _state["core_bound"]:
        _bind_local_core(rank, size)
        _state["core_bound"] = True
    # FSDP2 defines its fsdp:: ops on import (1.5 s); a group is what FSDP2 needs, so load and route them now.
    importlib.import_module("torch.distributed.fsdp._fully_shard._fsdp_collectives")
    route_ops()
    return ProcessGroupNeuron(store, rank, size, timeout)


def _rendezvous(url: str, **kwargs):
    raise ValueError(
        f"init_method {url!r}: the 'neuron' rendezvous scheme is registered by torch-neuronx with a handler that "
        f"does nothing ({SOURCE}); use env:// (torchrun), tcp:// or file:// with backend='neuron'"
    )


def register() -> None:
    """Register the ``neuron`` backend and rendezvous scheme, and route the collective ops (once per process)."""
    if _state["registered"]:
        return
    dist.Backend.register_backend(BACKEND, _create_process_group, devices=[BACKEND])
    try:
        dist.register_rendezvous_handler(BACKEND, _rendezvous)
    except RuntimeError:  # already registered: leave the other handler in place
        pass
    route_ops()
    _state["registered"] = True


register()
