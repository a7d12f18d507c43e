"""Per-NeuronCore memory accounting of the simulated device: live bytes, peak, capacity and OOM.

A device storage is counted once however many tensors view it; it is released once its host storage has died.
"""

from __future__ import annotations

import torch

from neuron_backend.config import CONFIG

_expired = torch.UntypedStorage._expired
_free_ref = torch.UntypedStorage._free_weak_ref
# storage data_ptr -> (nbytes, core, C-level weak reference to the storage). Dead storages are released by a sweep
# rather than by a per-tensor weakref callback (which cost ~2.5 us per device op): every figure that must be exact
# sweeps first - stats queries, a would-be new peak, the capacity check - so allocated, peak and OOM are the same as
# with immediate release. An entry whose address the allocator reused is released when the new storage is tracked.
_live: dict[int, tuple[int, int, int]] = {}
_allocated: list[int] = [0] * CONFIG.cores
_peak: list[int] = [0] * CONFIG.cores
# Entry count that forces a sweep, so dead entries stay bounded where peak and capacity are never approached.
_SWEEP_MIN = 1024
_sweep_at = _SWEEP_MIN
# Pointers tracked since the last sweep. Temporaries die young, so releasing the dead among these first usually
# brings the counted total (an upper bound of the exact one) back under the peak without scanning every storage.
_young: list[int] = []


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
    """Release every counted storage whose host storage has died since the last sweep."""
    global _sweep_at
    for ptr in [p for p, entry in _live.items() if _expired(entry[2])]:
        _drop(ptr)
    _young.clear()
    _sweep_at = max(_SWEEP_MIN, 2 * len(_live))


def _sweep_young() -> None:
    for ptr in _young:
        entry = _live.get(ptr)
        if entry is not None and _expired(entry[2]):  # whatever now lives at ptr: any dead entry may go
            _drop(ptr)
    _young.clear()


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
        _drop(ptr)  # the old storage died and the allocator reused its address
    nbytes = storage.nbytes()
    new_total = _allocated[core] + nbytes
    if new_total > _peak[core] or new_total > CONFIG.memory_per_core or len(_young) >= _SWEEP_MIN:
        _sweep_young()
        new_total = _allocated[core] + nbytes
        # Still over: the counted total may include older dead storages; make it exact before a peak/OOM decision.
        if new_total > _peak[core] or new_total > CONFIG.memory_per_core or len(_live) >= _sweep_at:
            sweep()
            check_fits(nbytes, core)
            new_total = _allocated[core] + nbytes
            if new_total > _peak[core]:
                _peak[core] = new_total
    _live[ptr] = (nbytes, core, storage._weak_ref())
    _allocated[core] = new_total
    _young.append(ptr)


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
