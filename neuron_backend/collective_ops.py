"""c10d, functional-collective, DTensor and FSDP2 ops that reach device tensors: where each runs, the checks the real
backend makes first, and a record of the collectives run. The process group itself is in collectives.py.

A c10d op on device tensors reaches the C++ core's kernel (registered over c10d's PrivateUse1 kernel) and runs c10d's
CPU kernel on host aliases of the device memory, which reaches the group's host gloo backend
(collectives.ProcessGroupNeuron registers it for the cpu and neuron device types); it has completed when it returns.
The other namespaces' ops run their own kernels (PrivateUse1, or CompositeExplicitAutograd) on the device tensors.
"""

from __future__ import annotations

import collections
import threading

import torch
from torch._C._distributed_c10d import ReduceOp, Work

from neuron_backend import device_module, dispatch
from neuron_backend.errors import NeuronUnsupportedCollectiveError
from neuron_backend.hardware.collective_table import SOURCE, UNSUPPORTED_COLLECTIVES
from neuron_backend.tensor import _C, host, wrap

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
# Namespaces whose ops on device tensors run on a process group (c10d) or as PyTorch's own kernels written
# against the device (the rest: functional collectives, DTensor's all-to-all, FSDP2's copy-in/out).
_GROUP_NAMESPACES = ("c10d",)
_KERNEL_NAMESPACES = ("_c10d_functional", "_dtensor", "fsdp")
_routed: set[str] = set()
_executed: collections.Counter[str] = collections.Counter()
_lock = threading.Lock()


def flat_tensors(x) -> list[torch.Tensor]:
    """The tensors in ``x``, a tensor or (nested) lists/tuples of them."""
    if isinstance(x, torch.Tensor):
        return [x]
    if type(x) is list or type(x) is tuple:
        return [t for y in x for t in flat_tensors(y)]
    return []


def unsupported(op: str, tensors=()) -> NeuronUnsupportedCollectiveError:
    """The typed error for a collective the real process group lacks (hardware/collective_table.py says why)."""
    flat = flat_tensors(tensors)
    return NeuronUnsupportedCollectiveError(
        op, [str(t.dtype).removeprefix("torch.") for t in flat], [tuple(t.shape) for t in flat],
        UNSUPPORTED_COLLECTIVES.get(op, "") + f"; source: {SOURCE}",
    )


def executed_collectives() -> dict[str, int]:
    """c10d ops this process has run on the device since the last reset, with counts."""
    with _lock:
        return dict(_executed)


def reset_executed_collectives() -> None:
    with _lock:
        _executed.clear()


def _to_host(x, originals: dict[int, torch.Tensor], staged: list[tuple[torch.Tensor, torch.Tensor]]):
    t = type(x)
    if isinstance(x, torch.Tensor) and x.device.type == "neuron":
        data = host(x)
        if not data.is_contiguous():  # gloo needs dense buffers; results are copied back into the view after
            dense = data.contiguous()
            staged.append((data, dense))
            data = dense
        originals[id(data)] = x
        return data
    if t is list or t is tuple:
        return t(_to_host(y, originals, staged) for y in x)
    return x


def _to_device(x, originals: dict[int, torch.Tensor], core: int):
    if isinstance(x, torch.Tensor):
        original = originals.get(id(x))
        return wrap(x, core) if original is None and x.device.type == "cpu" else (x if original is None else original)
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
        raise unsupported(name, args[:1])
    if name == "c10d::alltoall_base_":
        for splits in (args[3], args[4]):
            if splits and any(s != 1 for s in splits):
                raise NeuronUnsupportedCollectiveError(
                    name, [str(args[1].dtype).removeprefix("torch.")], [tuple(args[1].shape)],
                    f"only even splits (none, or all ones) are supported, got {list(splits)}; source: {SOURCE}",
                )
    elif name in ("c10d::allgather_", "c10d::allgather_into_tensor_coalesced_"):
        empty = [tuple(t.shape) for t in flat_tensors(args[:2]) if t.dim() > 0 and t.size(0) == 0]
        if empty:  # backend.py _validate_no_zero_dim0 raises ValueError
            raise ValueError(f"tensors cannot have zero size in dimension 0, found: {empty} ({name} on neuron)")


def _reduce_op_of(args) -> int | None:
    for a in args:
        if isinstance(a, torch.ScriptObject) and a._type().qualified_name().endswith("c10d.ReduceOp"):
            return int(a.op())
    return None


def _run_on_group(func, args, kwargs):
    """A c10d op on device tensors: its CPU kernel, run on host aliases of the device memory, reaches the group's
    host gloo backend; the op has completed when this returns."""
    name = func._schema.name
    _check_supported(name, args)
    if _reduce_op_of(args) == int(ReduceOp.PREMUL_SUM):
        raise NotImplementedError(
            f"{name} with PREMUL_SUM reached the simulated device without its factor (only the Python API paths "
            "pre-scale it): a limit of the simulation, not of the device, which supports PREMUL_SUM"
        )
    originals: dict[int, torch.Tensor] = {}
    staged: list[tuple[torch.Tensor, torch.Tensor]] = []
    host_args = _to_host(args, originals, staged)
    host_kwargs = {k: _to_host(v, originals, staged) for k, v in kwargs.items()}
    try:
        out = func.redispatch(_CPU_KEYS, *host_args, **host_kwargs)
        _wait_all(out)
    except Exception as exc:
        exc.add_note(f"while running {name} on the neuron device (simulated collective over the host gloo group)")
        if not hasattr(exc, "neuron_collective"):
            exc.neuron_collective = name
        raise
    for view, dense in staged:
        view.copy_(dense)
    for t in originals.values():
        _C.touch(t)  # the group wrote device memory through host aliases
    with _lock:
        _executed[name] += 1
    core = next(iter(originals.values())).device.index if originals else device_module.current_device()
    return _to_device(out, originals, core)


def route_ops() -> None:
    """Route every c10d op defined so far (new ones appear on import) to the group; the functional-collective, DTensor
    and FSDP2 ops keep their own kernels (PrivateUse1, or CompositeExplicitAutograd), run on the device tensors
    themselves, so their inner ops are device ops and their collectives reach the group."""
    covered = []
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
            if ns in _GROUP_NAMESPACES and (
                    op._schema.name in UNSUPPORTED_COLLECTIVES or _has_kernel(op, "PrivateUse1")):
                dispatch.register_special(op, _run_on_group)
                covered.append(op.name())
    if covered:
        _C.cover(covered)


def _has_kernel(op, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)
