"""The ``neuron`` torch.distributed backend of the simulated device: ``ProcessGroupNeuron``, one rank per process on
one host, and its registration (ops on device tensors: collective_ops.py; the real backend's tables: hardware/collective_table.py).

It models semantics, not bandwidth: data moves between ranks through a gloo group on host views of the device
tensors (``tensor.host``: CPU aliases of their memory), and every collective has completed when its call returns (one timeline, as in the
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

import datetime
import importlib
import os
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllreduceOptions,
    ProcessGroup,
    ProcessGroupGloo,
    ReduceOp,
    ReduceScatterOptions,
)

from neuron_backend import collective_ops, device_module
from neuron_backend.collective_ops import executed_collectives, reset_executed_collectives, unsupported
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedCollectiveError
from neuron_backend.hardware.collective_table import (
    NATIVE_COLLECTIVES,
    REDUCE_OPS,
    SOURCE,
    UNSUPPORTED_COLLECTIVES,
)

BACKEND = "neuron"
_state: dict[str, Any] = {"registered": False, "core_bound": False}

__all__ = [
    "BACKEND", "SOURCE", "NATIVE_COLLECTIVES", "UNSUPPORTED_COLLECTIVES", "REDUCE_OPS", "ProcessGroupNeuron",
    "NeuronUnsupportedCollectiveError", "executed_collectives", "reset_executed_collectives", "register",
]


def _premul_factor(opts) -> Any:
    """PREMUL_SUM's factor, turning ``opts`` into a plain SUM (the real backend pre-scales the inputs likewise)."""
    kind, factor = opts.reduceOp.__getstate__()
    if kind != ReduceOp.PREMUL_SUM:
        return None
    opts.reduceOp = ReduceOp.SUM
    return factor


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
        raise unsupported("c10d::send", tensors)

    def recv(self, tensors, *args):
        raise unsupported("c10d::recv_", tensors)

    def recv_anysource(self, tensors, *args):
        raise unsupported("c10d::recv_any_source_", tensors)

    def monitored_barrier(self, *args, **kwargs):
        raise unsupported("c10d::monitored_barrier_")


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
    collective_ops.route_ops()
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
    collective_ops.route_ops()
    _state["registered"] = True


register()
