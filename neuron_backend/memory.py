"""Per-NeuronCore memory accounting of the simulated device: live bytes, peak, capacity and OOM.

A device storage is counted once however many tensors view it; it is released when its host storage dies.
"""

from __future__ import annotations

import weakref

import torch

from neuron_backend.config import CONFIG

_expired = torch.UntypedStorage._expired
_free_ref = torch.UntypedStorage._free_weak_ref
# storage data_ptr -> (nbytes, core, C-level weak reference to the storage). The first host tensor of a storage
# carries a Python weak reference whose callback releases the storage; if views outlive that tensor the storage
# moves to _pending and is released by the next sweep (stats queries, a would-be new peak or OOM).
_live: dict[int, tuple[int, int, int]] = {}
_pending: set[int] = set()
_refs: dict[int, weakref.ref] = {}  # keyed by id(): weakrefs to tensors would compare referents with ==
_allocated: list[int] = [0] * CONFIG.cores
_peak: list[int] = [0] * CONFIG.cores


def _fmt(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def capacity() -> int:
    """Bytes of device memory per NeuronCore."""
    return CONFIG.memory_per_core


def _drop(ptr: int) -> None:
    nbytes, core, ref = _live.pop(ptr)
    _allocated[core] -= nbytes
    _free_ref(ref)


def sweep() -> None:
    """Release pending storages (their first tensor died while views lived on) that have died since."""
    for ptr in [p for p in _pending if p not in _live or _expired(_live[p][2])]:
        _pending.discard(ptr)
        if ptr in _live:
            _drop(ptr)


def _on_death(wref: weakref.ref, ptr: int) -> None:
    _refs.pop(id(wref), None)
    entry = _live.get(ptr)
    if entry is None:
        return
    if _expired(entry[2]):
        _drop(ptr)
    else:
        _pending.add(ptr)


def check_fits(nbytes: int, core: int) -> None:
    """Raise torch.OutOfMemoryError if allocating ``nbytes`` on ``core`` would exceed its capacity."""
    if _allocated[core] + nbytes > CONFIG.memory_per_core:
        sweep()
    if _allocated[core] + nbytes > CONFIG.memory_per_core:
        total = CONFIG.memory_per_core
        free = total - _allocated[core]
        raise torch.OutOfMemoryError(
            f"neuron:{core} out of memory: tried to allocate {_fmt(nbytes)}; NeuronCore {core} has a total capacity "
            f"of {_fmt(total)}, of which {_fmt(_allocated[core])} is allocated and {_fmt(free)} is free "
            "(NEURON_MEMORY_GB sets the capacity per core)."
        )


def track(wrapper: torch.Tensor, inner: torch.Tensor, core: int) -> None:
    """Account the storage behind ``wrapper``: a new storage counts against capacity; a view adds nothing."""
    storage = inner.untyped_storage()
    ptr = storage.data_ptr()
    if ptr == 0:  # zero-byte storage
        return
    entry = _live.get(ptr)
    if entry is not None:
        if not _expired(entry[2]):
            return  # a view of a storage we already count
        _pending.discard(ptr)  # the old storage died and the allocator reused its address
        _drop(ptr)
    nbytes = storage.nbytes()
    new_total = _allocated[core] + nbytes
    if new_total > _peak[core] or new_total > CONFIG.memory_per_core:
        if _pending:
            sweep()
        check_fits(nbytes, core)
        new_total = _allocated[core] + nbytes
        if new_total > _peak[core]:
            _peak[core] = new_total
    _live[ptr] = (nbytes, core, storage._weak_ref())
    _allocated[core] = new_total
    wref = weakref.ref(inner, lambda r, p=ptr: _on_death(r, p))
    _refs[id(wref)] = wref


def memory_allocated(core: int) -> int:
    sweep()
    return _allocated[core]


def max_memory_allocated(core: int) -> int:
    return _peak[core]


def reset_peak_memory_stats(core: int) -> None:
    sweep()
    _peak[core] = _allocated[core]


def mem_get_info(core: int) -> tuple[int, int]:
    """(free, total) bytes of one NeuronCore, like torch.cuda.mem_get_info."""
    sweep()
    return CONFIG.memory_per_core - _allocated[core], CONFIG.memory_per_core
