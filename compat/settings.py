"""Every knob of neuron-compat, read from the environment (prefix ``COMPAT_``) in one place.

Device knobs (``NEURON_*``) belong to ``neuron_backend`` and are read there, not here.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration of the harness, the service and the distributed workers."""

    model_config = SettingsConfigDict(env_prefix="COMPAT_", extra="ignore")

    # Where state lives on the embedded default (SQLite DB, tiny checkpoints, logs, reports).
    var_dir: Path = Path("./var")
    database_url: str = "sqlite:///./var/compat.db"

    # Sweep defaults.
    device: str = "neuron"
    catalog_source: str = "auto"  # auto = snapshot if one exists, else registry
    catalog_snapshot: Path | None = None  # default: <var_dir>/catalog/snapshot.json
    hub_limit: int = Field(1000, ge=1, le=100_000)
    jobs: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1, le=256)
    arch_timeout_s: float = Field(300.0, gt=0)
    arch_memory_mb: int = Field(6144, ge=256)
    max_tiny_params: int = Field(8_000_000, ge=1000)
    seed: int = 0
    # The content-addressed CPU reference cache (worker/run/reference_cache.py): on/off (COMPAT_REFERENCE_CACHE=0),
    # its folder (default <var_dir>/reference-cache) and its size bound (oldest entries by mtime evicted past it).
    reference_cache: bool = True
    reference_cache_dir: Path | None = None
    reference_cache_mb: int = Field(2048, ge=1)

    # Distributed mode (Celery on Redis). Empty = in-process executor.
    broker_url: str = ""
    result_backend: str = ""
    nightly_cron: str = "0 2 * * *"  # UTC, five cron fields
    celery_queue: str = "compat"
    # Hard time limit of one architecture task = arch_timeout_s (the soft limit) + this grace.
    task_hard_grace_s: float = Field(30.0, gt=0)
    # Redis redelivers an unacked task after this long; must exceed the hard time limit (checked).
    visibility_timeout_s: float = Field(600.0, gt=0)
    restore_interval_s: float = Field(10.0, gt=0)  # how often workers sweep for abandoned tasks
    crash_retries: int = Field(2, ge=0, le=20)  # reruns of a task whose process died, then `crash`
    worker_max_tasks_per_child: int = Field(50, ge=1)
    worker_max_memory_mb: int = Field(4096, ge=64)  # recycle a pool process above this RSS
    # "module:function" replacing worker.run.runner.run_on (the device by name) in tasks; tests and benchmarks only.
    run_hook: str = ""

    # Service.
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    max_upload_bytes: int = Field(256 * 1024, ge=1024)
    # A submitted config that would build a bigger model (counted on the meta device) is refused.
    max_submission_params: int = Field(1_000_000_000_000, ge=1000)
    # The meta-device build of a submitted config, the last and only slow validation step, gets this long.
    validation_timeout_s: float = Field(10.0, gt=0, le=600)
    # Submission runs at a time in one process without a broker (with one, the broker's queue bounds them).
    submission_workers: int = Field(1, ge=1, le=64)
    # Dashboard headline: "N% of the top <dashboard_top_n> architectures by Hub rank".
    dashboard_top_n: int = Field(100, ge=1, le=100_000)

    @property
    def snapshot_path(self) -> Path:
        return self.catalog_snapshot or self.var_dir / "catalog" / "snapshot.json"

    @property
    def reference_cache_path(self) -> Path:
        return self.reference_cache_dir or self.var_dir / "reference-cache"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings; tests call ``get_settings.cache_clear()`` after changing the env."""
    return Settings()


class SettingError(ValueError):
    """A setting's value cannot be used (e.g. a database URL nothing can open): one line naming the variable and the
    value; the CLI prints it and exits 2 instead of a traceback."""
