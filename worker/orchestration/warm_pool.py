"""The sweep's pool of warm workers on a device, by the device's name: light to import (no torch), so the CLI starts
it before it imports the harness and the workers' warm-up (torch, transformers, the device) overlaps its own imports.
"""

from __future__ import annotations

from compat.settings import get_settings
from worker.run.process.pool import ARCH_THREADS, Pool

WARMUP = "worker.run.runner.runner:warm_worker"  # by name: resolved in each worker, never imported here


def sweep_pool(device: str, jobs: int, *, time_limit_s: float | None = None,
               memory_limit_mb: int | None = None) -> Pool:
    """The sweep's pool of ``jobs`` warm workers on the device named ``device`` (limits: the settings' unless
    given); a caller that opens one can hand it to ``run_sweep`` and to the phases after it (``VariantRunner``),
    which then start no workers of their own."""
    settings = get_settings()
    return Pool(jobs, time_limit_s=time_limit_s or settings.arch_timeout_s,
                memory_limit_mb=memory_limit_mb or settings.arch_memory_mb,
                warmup=None if settings.run_hook else WARMUP, warmup_args=(ARCH_THREADS, device))
