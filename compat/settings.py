"""Every knob of neuron-compat, read from the environment (prefix ``COMPAT_``) in one place.

Device knobs (``NEURON_*``) belong to ``neuron_backend`` and are read there, not here.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT = "neuron-compat"


def default_var_dir(package_dir: Path | None = None) -> Path:
    """Where state lives unless COMPAT_VAR_DIR says: ``var/`` of the checkout this package runs from (its
    pyproject.toml names the project, next to the ``cli`` package), else ``$XDG_DATA_HOME/neuron-compat``. Never the
    current directory: a ``compat`` run elsewhere must read the same store, not create an empty one there."""
    root = (package_dir or Path(__file__).resolve().parent).parent
    try:
        checkout = (root / "cli").is_dir() and f'name = "{PROJECT}"' in (root / "pyproject.toml").read_text()
    except OSError:  # no pyproject.toml: an installed wheel, not a checkout
        checkout = False
    if checkout:
        return root / "var"
    data = os.environ.get("XDG_DATA_HOME") or str(Path(os.environ.get("HOME") or "/tmp") / ".local" / "share")
    return Path(data) / PROJECT


class Settings(BaseSettings):
    """Configuration of the harness, the service and the distributed workers."""

    model_config = SettingsConfigDict(env_prefix="COMPAT_", extra="ignore")

    # Where state lives on the embedded default (SQLite DB, tiny checkpoints, logs, reports).
    # Default: the checkout's var/ or the user's data dir (default_var_dir), never the current directory.
    var_dir: Path = Field(default_factory=default_var_dir)
    database_url: str = Field("", validate_default=True)  # default: sqlite:///<var_dir, absolute>/compat.db

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
    # The content-addressed CPU reference cache (worker/run/reference/reference_cache.py): on/off (COMPAT_REFERENCE_CACHE=0),
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
    # "module:function" replacing worker.run.runner.runner.run_on (the device by name) in tasks; tests and benchmarks only.
    run_hook: str = ""

    # Notifications (worker/orchestration/notify.py), each off until configured. The webhook gets one JSON POST per
    # run with confirmed regressions; GitHub gets one issue per failure signature. Every request gets
    # ``notify_timeout_s`` and ``notify_retries`` more tries, so a down or slow endpoint delays a run by a bounded time.
    notify_webhook: SecretStr = SecretStr("")  # a Slack-style webhook URL is itself a credential: never logged
    public_url: str = ""  # the dashboard's public address, for the links in notifications (e.g. https://compat.example)
    github_repo: str = Field("", pattern=r"^$|^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")  # owner/name
    github_token: SecretStr = SecretStr("")
    github_api_url: str = "https://api.github.com"  # tests point it at a fake GitHub on 127.0.0.1
    notify_timeout_s: float = Field(5.0, gt=0, le=60)
    notify_retries: int = Field(1, ge=0, le=5)
    # The lane a run belongs to (its own identity and baseline): "pinned" (the project's exact pins) or
    # "transformers-latest" (the newest transformers release installed over the pin; .github/workflows/nightly.yml).
    lane: str = Field("pinned", pattern=r"^[a-z0-9][a-z0-9-]{0,31}$")
    # Cron of the newest-Transformers lane's nightly in ``compat beat`` (empty: off); its tasks go to
    # ``<celery_queue>-<lane>``, served by workers that have that transformers installed (docker-compose.yml).
    latest_lane_cron: str = ""

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
    # Submissions waiting or running at once (all callers; one API token): past either, a new one gets 429.
    max_queued_submissions: int = Field(20, ge=1, le=100_000)
    max_queued_per_token: int = Field(5, ge=1, le=100_000)
    # Dashboard headline: "N% of the top <dashboard_top_n> architectures by Hub rank".
    dashboard_top_n: int = Field(100, ge=1, le=100_000)

    @field_validator("database_url")
    @classmethod
    def _database_in_var_dir(cls, url: str, info: ValidationInfo) -> str:
        # Follows COMPAT_VAR_DIR; absolute, so a message naming the store names one place wherever it runs.
        var_dir = info.data.get("var_dir")
        return url or (f"sqlite:///{Path(var_dir).absolute() / 'compat.db'}" if var_dir is not None else url)

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
