"""Per-NeuronCore memory accounting of the simulated device: live bytes, peak, capacity and OOM.

A device storage is counted once however many tensors view it, and released when the last one dies.
"""

from __future__ import annotations

import weakref

import torch

from neuron_backend.config import CONFIG

# storage data_ptr -> [nbytes, live wrapper count, core]; a dict keyed by address because the CPU storage that
# backs a device tensor is the one thing every view of it shares.
_live: dict[int, list[int]] = {}
# Keyed by id(): weakrefs to tensors compare their referents with ==, which a set would call on hash collisions.
_refs: dict[int, weakref.ref] = {}
_allocated: list[int] = [0] * CONFIG.cores
_peak: list[int] = [0] * CONFIG.cores


def _fmt(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def capacity() -> int:
    """Bytes of device memory per NeuronCore."""
    return CONFIG.memory_per_core


def check_fits(nbytes: int, core: int) -> None:
    """Raise torch.OutOfMemoryError if allocating ``nbytes`` on ``core`` would exceed its capacity."""
    if _allocated[core] + nbytes > CONFIG.memory_per_core:
        total = CONFIG.memory_per_core
        free = total - _allocated[core]
        raise torch.OutOfMemoryError(
            f"neuron:{core} out of memory: tried to allocate {_fmt(nbytes)}; NeuronCore {core} has a total capacity "
            f"of {_fmt(total)}, of which {_fmt(_allocated[core])} is allocated and {_fmt(free)} is free "
            "(NEURON_MEMORY_GB sets the capacity per core)."
        )


def _release(ref: weakref.ref, ptr: int) -> None:
    _refs.pop(id(ref), None)
    entry = _live.get(ptr)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _live[ptr]
        _allocated[entry[2]] -= entry[0]


def track(wrapper: torch.Tensor, inner: torch.Tensor, core: int) -> None:
    """Account the storage behind ``wrapper`` (new storages count against capacity; views only add a reference)."""
    storage = inner.untyped_storage()
    ptr = storage.data_ptr()
    if ptr == 0:  # zero-byte storage
        return
    entry = _live.get(ptr)
    if entry is None:
        nbytes = storage.nbytes()
        check_fits(nbytes, core)
        _live[ptr] = entry = [nbytes, 0, core]
        _allocated[core] += nbytes
        if _allocated[core] > _peak[core]:
            _peak[core] = _allocated[core]
    entry[1] += 1
    # The weak reference is on the host tensor, not the wrapper: Module._apply swaps wrappers (swap_tensors),
    # which refuses tensors that have weak references.
    ref = weakref.ref(inner, lambda r, p=ptr: _release(r, p))
    _refs[id(ref)] = ref


def memory_allocated(core: int) -> int:
    return _allocated[core]


def max_memory_allocated(core: int) -> int:
    return _peak[core]


def reset_peak_memory_stats(core: int) -> None:
    _peak[core] = _allocated[core]


def mem_get_info(core: int) -> tuple[int, int]:
    """(free, total) bytes of one NeuronCore, like torch.cuda.mem_get_info."""
    return CONFIG.memory_per_core - _allocated[core], CONFIG.memory_per_core
