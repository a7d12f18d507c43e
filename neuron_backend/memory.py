"""Per-NeuronCore memory of the simulated device: a caching allocator's allocated/reserved bytes, peaks, capacity, OOM.

A device storage is one allocator block, counted once however many tensors view it and released once its host
storage has died; a released block stays cached (reserved) for reuse until ``empty_cache``. Thread-safe.

The allocator model (source: AWS Neuron docs, torch/reference/guidelines-memory-management, date-modified 2026-10-08,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html):
- "Requests smaller than 1 MB go to the small pool. Requests of 1 MB or larger go to the large pool." -> ``pool_of``.
- "Requests smaller than 16 MB are rounded up to a size class, with a minimum of 256 bytes. Requests of 16 MB or
  larger are not rounded." -> ``block_size``. WHICH size classes is not in the retrieved text (unknown): they are
  modelled as powers of two (an assumption, low confidence; it bounds the rounding overhead below 16 MB at 2x).
- "When a tensor is freed, its block stays in the segment for reuse and is not returned to NRT"; the counters satisfy
  "reserved >= allocated". A freed block is reused by a later request of the same block size and pool, as the
  pre-beta source's NrtTensorPool recycles by exact size (INDICATIVE, not the release: parmoham-aws/test-repo-parmoham
  @ 98154b867aa24562a3213e520d9ad7fd41032291, torch_neuronx/csrc/core/allocator/NeuronCachingAllocator.cpp,
  TryRecycle); on an allocation that does not fit, cached blocks are released and the allocation retried before OOM
  (same file, AllocateWithRetry: "OOM - prune expired entries and retry").
Not modelled: segments (reserved grows per block, not per NRT segment), block splitting, streams.
"""

from __future__ import annotations

import threading

import torch

from neuron_backend import autocast
from neuron_backend.config import CONFIG

MB = 1 << 20
SMALL_POOL_LIMIT = 1 * MB  # below: small pool
ROUND_LIMIT = 16 * MB  # below: rounded to a size class
MIN_BLOCK = 256

_expired = torch.UntypedStorage._expired
_free_ref = torch.UntypedStorage._free_weak_ref
# One lock for all bookkeeping: Transformers loads weights from several threads at once (a dict walked while another
# thread inserts raised "dictionary changed size during iteration"). Taken only by the public functions; the
# underscore helpers run under it and never take it (a plain Lock is cheaper than an RLock on this per-op path).
_lock = threading.Lock()
# storage data_ptr -> (block bytes, core, C-level weak reference to the storage). Dead storages are released by a
# sweep rather than by a per-tensor weakref callback (which cost ~2.5 us per device op): every figure that must be exact
# sweeps first - stats queries, a would-be new peak, the capacity check - so allocated, peak and OOM are the same as
# with immediate release. An entry whose address the allocator reused is released when the new storage is tracked.
_live: dict[int, tuple[int, int, int]] = {}
_allocated: list[int] = [0] * CONFIG.cores
_reserved: list[int] = [0] * CONFIG.cores
_peak: list[int] = [0] * CONFIG.cores
_peak_reserved: list[int] = [0] * CONFIG.cores
# per core: block bytes -> number of cached (freed, still reserved) blocks of that size
_cached: list[dict[int, int]] = [{} for _ in range(CONFIG.cores)]
# Entry count that forces a sweep, so dead entries stay bounded where peak and capacity are never approached.
_SWEEP_MIN = 1024
_sweep_at = _SWEEP_MIN
# Pointers tracked since the last sweep. Temporaries die young, so releasing the dead among these first usually
# brings the counted total (an upper bound of the exact one) back under the peak without scanning every storage.
_young: list[int] = []


def pool_of(nbytes: int) -> str:
    """``"small"`` below 1 MB, else ``"large"`` (the docs' two pools)."""
    return "small" if nbytes < SMALL_POOL_LIMIT else "large"


def block_size(nbytes: int) -> int:
    """Bytes the allocator reserves for a request: a size class (power of two, >= 256 B) below 16 MB, else exact."""
    if nbytes >= ROUND_LIMIT:
        return nbytes
    if nbytes <= MIN_BLOCK:
        return MIN_BLOCK
    return 1 << (nbytes - 1).bit_length()


def _fmt(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def capacity() -> int:
    """Bytes of device memory per (logical) NeuronCore."""
    return CONFIG.memory_per_core


def _drop(ptr: int) -> None:
    block, core, ref = _live.pop(ptr)
    _allocated[core] -= block
    cache = _cached[core]
    cache[block] = cache.get(block, 0) + 1
    _free_ref(ref)


def _sweep() -> None:
    global _sweep_at
    for ptr in [p for p, entry in _live.items() if _expired(entry[2])]:
        _drop(ptr)
    _young.clear()
    _sweep_at = max(_SWEEP_MIN, 2 * len(_live))
    if autocast._wide:
        autocast.prune_wide()


def sweep() -> None:
    """Release every counted storage whose host storage has died since the last sweep (its block stays cached)."""
    with _lock:
        _sweep()


def _sweep_young() -> None:
    for ptr in _young:
        entry = _live.get(ptr)
        if entry is not None and _expired(entry[2]):  # whatever now lives at ptr: any dead entry may go
            _drop(ptr)
    _young.clear()


def _release_cache(core: int) -> None:
    _reserved[core] -= sum(block * n for block, n in _cached[core].items())
    _cached[core].clear()


def _oom(block: int, core: int) -> torch.OutOfMemoryError:
    total = CONFIG.memory_per_core
    return torch.OutOfMemoryError(
        f"neuron:{core} out of memory: tried to allocate {_fmt(block)}; NeuronCore {core} has a total capacity "
        f"of {_fmt(total)}, of which {_fmt(_allocated[core])} is allocated and {_fmt(total - _reserved[core])} is "
        "free (the profile's HBM per chip / logical NeuronCores per chip sets the capacity; NEURON_MEMORY_GB "
        "overrides it)."
    )


# Whether this process ever reserved device memory (no device tensor, no device backward: teardown's drain is moot).
_ever_reserved = [False]


def used() -> bool:
    """Whether any device memory was ever reserved in this process."""
    return _ever_reserved[0]


def _reserve(block: int, core: int) -> None:
    """Take a cached block of this size, or reserve a new one: sweep, then release the cache, then OOM."""
    cache = _cached[core]
    if cache.get(block):
        cache[block] -= 1
        return
    if _reserved[core] + block > CONFIG.memory_per_core:
        _sweep()
        if cache.get(block):
            cache[block] -= 1
            return
        _release_cache(core)
        if _reserved[core] + block > CONFIG.memory_per_core:
            raise _oom(block, core)
    _reserved[core] += block
    _ever_reserved[0] = True
    if _reserved[core] > _peak_reserved[core]:
        _peak_reserved[core] = _reserved[core]


def check_fits(nbytes: int, core: int) -> None:
    """Raise torch.OutOfMemoryError if a request of ``nbytes`` on ``core`` cannot be reserved (before allocating)."""
    block = block_size(nbytes)
    with _lock:
        if _cached[core].get(block) or _reserved[core] + block <= CONFIG.memory_per_core:
            return
        _sweep()
        if _cached[core].get(block):
            return
        if _allocated[core] + block > CONFIG.memory_per_core:
            raise _oom(block, core)


def track(wrapper: torch.Tensor, inner: torch.Tensor, core: int) -> None:
    """Account the storage behind ``wrapper``: a new storage takes a block; a view adds nothing."""
    storage = inner.untyped_storage()
    ptr = storage.data_ptr()
    if ptr == 0:  # zero-byte storage
        return
    with _lock:
        entry = _live.get(ptr)
        if entry is not None:
            if not _expired(entry[2]):
                return  # a view of a storage we already count
            _drop(ptr)  # the old storage died and the allocator reused its address
        n = storage.nbytes()  # block_size inlined: this runs once per device op
        block = n if n >= ROUND_LIMIT else (MIN_BLOCK if n <= MIN_BLOCK else 1 << (n - 1).bit_length())
        new_total = _allocated[core] + block
        if new_total > _peak[core] or len(_young) >= _SWEEP_MIN:
            _sweep_young()
            new_total = _allocated[core] + block
            # Still over: the counted total may include older dead storages; make it exact before a peak decision.
            if new_total > _peak[core] or len(_live) >= _sweep_at:
                _sweep()
                new_total = _allocated[core] + block
        cache = _cached[core]
        cached = cache.get(block)
        if not cached and _young:
            # Temporaries that died since the last sweep would have freed their blocks already on the real
            # allocator: release them first, so reserved does not grow by blocks a real cache would reuse.
            _sweep_young()
            new_total = _allocated[core] + block
            cached = cache.get(block)
        if cached:  # _reserve's common case inlined: reuse a cached block of this size
            cache[block] = cached - 1
        else:
            _reserve(block, core)
        if new_total > _peak[core]:
            _peak[core] = new_total
        _live[ptr] = (block, core, storage._weak_ref())
        _allocated[core] = new_total
        _young.append(ptr)


def memory_allocated(core: int) -> int:
    """Bytes of the blocks held by live tensors on ``core`` (rounded block sizes, as a caching allocator reports)."""
    with _lock:
        _sweep()
        return _allocated[core]


def memory_reserved(core: int) -> int:
    """Bytes the allocator holds on ``core``: live blocks plus cached free blocks (always >= memory_allocated)."""
    with _lock:
        _sweep()
        return _reserved[core]


def max_memory_allocated(core: int) -> int:
    return _peak[core]


def max_memory_reserved(core: int) -> int:
    return _peak_reserved[core]


def reset_peak_memory_stats(core: int) -> None:
    with _lock:
        _sweep()
        _peak[core] = _allocated[core]
        _peak_reserved[core] = _reserved[core]


def empty_cache() -> None:
    """Return every cached free block to the device (reserved drops to allocated), like torch.cuda.empty_cache."""
    with _lock:
        _sweep()
        for core in range(len(_cached)):
            _release_cache(core)


def mem_get_info(core: int) -> tuple[int, int]:
    """(free, total) bytes of one NeuronCore, like torch.cuda.mem_get_info: free excludes the reserved cache."""
    with _lock:
        _sweep()
        return CONFIG.memory_per_core - _reserved[core], CONFIG.memory_per_core
