"""Per-NeuronCore memory of the simulated device: the C++ allocator's allocated/reserved bytes, peaks, capacity, OOM.

The allocator lives in csrc/allocator.cpp; this module reads its figures and sets its limits from the configuration.

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
A device storage is one block, counted once however many tensors view it, released when its last user dies.
Not modelled: segments (reserved grows per block, not per NRT segment), block splitting, streams.
"""

from __future__ import annotations

from neuron_backend import config, core
from neuron_backend.config import CONFIG

MB = 1 << 20
SMALL_POOL_LIMIT = 1 * MB  # below: small pool
ROUND_LIMIT = 16 * MB  # below: rounded to a size class
MIN_BLOCK = 256

_C = core.load()


def pool_of(nbytes: int) -> str:
    """``"small"`` below 1 MB, else ``"large"`` (the docs' two pools)."""
    return "small" if nbytes < SMALL_POOL_LIMIT else "large"


def block_size(nbytes: int) -> int:
    """Bytes the allocator reserves for a request: a size class (power of two, >= 256 B) below 16 MB, else exact."""
    return _C.block_size(nbytes)


def capacity() -> int:
    """Bytes of device memory per (logical) NeuronCore."""
    return CONFIG.memory_per_core


def used() -> bool:
    """Whether any device memory was ever reserved in this process."""
    return _C.used()


def check_fits(nbytes: int, core_index: int) -> None:
    """Raise torch.OutOfMemoryError if a request of ``nbytes`` on ``core_index`` cannot be reserved."""
    _C.check_fits(nbytes, core_index)


def memory_allocated(core_index: int) -> int:
    """Bytes of the blocks held by live tensors (rounded block sizes, as a caching allocator reports)."""
    return _C.stats(core_index)[0]


def memory_reserved(core_index: int) -> int:
    """Bytes the allocator holds: live blocks plus cached free blocks (always >= memory_allocated)."""
    return _C.stats(core_index)[1]


def max_memory_allocated(core_index: int) -> int:
    return _C.stats(core_index)[2]


def max_memory_reserved(core_index: int) -> int:
    return _C.stats(core_index)[3]


def reset_peak_memory_stats(core_index: int) -> None:
    _C.reset_peak(core_index)


def empty_cache() -> None:
    """Return every cached free block to the device (reserved drops to allocated), like torch.cuda.empty_cache."""
    _C.empty_cache()


def mem_get_info(core_index: int) -> tuple[int, int]:
    """(free, total) bytes of one NeuronCore, like torch.cuda.mem_get_info: free excludes the reserved cache."""
    return CONFIG.memory_per_core - memory_reserved(core_index), CONFIG.memory_per_core


def _configure(cfg: config.Config) -> None:
    _C.configure(cfg.cores, cfg.memory_per_core)


config.on_hardware_change(_configure)
_configure(CONFIG)
