"""Pydantic response/request schemas of the REST API and the dashboard pages (apart from the ORM models).

``service.queries`` returns these; the API serialises them and the dashboard renders them, so both agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from compat.results import ResultRecord

DECLARED_LABEL = "declared, not measured"


class CheckCoverage(BaseModel):
    check: str
    passed: int
    total: int
    fraction: float
    headline: str | None = None  # a check with its own headline (lora: "fine-tunes with LoRA"); never "supported"


class DeviceCoverage(BaseModel):
    """Headline of one device in one run: supported / total, per check, optionally over the top-N by rank."""

    device: str
    run_id: str
    run_started: datetime
    run_state: str
    simulated: bool = False
    top_n: int | None = None
    total: int
    supported: int
    fraction: float
    supported_with_fallback: int = 0
    per_check: list[CheckCoverage] = Field(default_factory=list)


class Coverage(BaseModel):
    items: list[DeviceCoverage]


class CoveragePoint(BaseModel):
    run_id: str
    started: datetime
    trigger: str
    state: str
    supported: int
    total: int
    fraction: float


class CoverageHistory(BaseModel):
    device: str
    points: list[CoveragePoint]  # oldest first


class ArchitectureRow(BaseModel):
    """One architecture on one device in that device's latest run."""

    name: str
    rank: int
    model_type: str = ""
    downloads: int = 0
    representative: str | None = None
    remote_code: bool = False
    device: str
    run_id: str
    supported: bool
    fallback: bool = False
    statuses: dict[str, str] = Field(default_factory=dict)  # check -> status
    blocking_op: str | None = None
    error: str | None = None  # "Type: message" of the first failing check


class ArchitecturePage(BaseModel):
    items: list[ArchitectureRow]
    total: int
    page: int
    per_page: int


class HistoryPoint(BaseModel):
    run_id: str
    started: datetime
    trigger: str
    device: str
    supported: bool
    statuses: dict[str, str]


class ArchitectureDetail(BaseModel):
    name: str
    model_type: str = ""
    rank: int | None = None
    downloads: int = 0
    representative: str | None = None
    remote_code: bool = False
    latest: list[ResultRecord]  # newest run per device
    supported: dict[str, bool]  # device -> supported in its newest run
    history: list[HistoryPoint]  # newest first
    blocking_op: str | None = None
    error: str | None = None
    repro: str | None = None
    badge_url: str


class RunSummary(BaseModel):
    id: str
    trigger: str
    device: str
    state: str
    started: datetime
    finished: datetime | None = None
    catalog_source: str
    snapshot_id: str | None = None
    versions: dict[str, Any] = Field(default_factory=dict)
    checks: list[str] = Field(default_factory=list)
    planned: int
    results: int
    total: int  # architectures in the run's catalog
    supported: int


class RunPage(BaseModel):
    items: list[RunSummary]
    total: int
    page: int
    per_page: int


class RunDetail(RunSummary):
    device_info: dict[str, Any] = Field(default_factory=dict)
    status_counts: dict[str, int] = Field(default_factory=dict)
    result_list: list[ResultRecord] = Field(default_factory=list)


class LogEntry(BaseModel):
    """The captured output one check of an architecture carries in a run."""

    device: str
    check: str
    status: str
    log: str


class DiffEntry(BaseModel):
    architecture: str
    rank: int | None = None
    before: dict[str, str] = Field(default_factory=dict)  # check -> status in run a
    after: dict[str, str] = Field(default_factory=dict)  # check -> status in run b
    changed_checks: list[str] = Field(default_factory=list)


class RunDiff(BaseModel):
    """Architecture-level change from run a to run b (supported = every support check passes)."""

    a: str
    b: str
    regressions: list[DiffEntry]  # supported in a, not in b
    fixes: list[DiffEntry]  # not supported in a, supported in b
    new: list[DiffEntry]  # only in b
    removed: list[DiffEntry]  # only in a
    changed: list[DiffEntry] = Field(default_factory=list)  # other per-check status changes


class Blocker(BaseModel):
    op: str
    count: int
    architectures: list[str]  # by rank
    best_rank: int | None = None


class Blockers(BaseModel):
    device: str | None
    run_id: str | None
    items: list[Blocker]


class DeclaredCoverageRow(BaseModel):
    kind: Literal["declared", "measured"]
    name: str  # stack name and version, or device name
    label: str  # "declared, not measured" or "measured on <device>, run <id>"
    source: str | None = None
    run_id: str | None = None
    supported: int
    total: int
    fraction: float
    architectures: list[str] = Field(default_factory=list)  # supported ones within the top-N


class DeclaredCoverage(BaseModel):
    top_n: int | None
    total: int
    rows: list[DeclaredCoverageRow]


class DeviceOut(BaseModel):
    name: str
    simulated: bool
    description: str
    torch_version: str
    backend_version: str
    last_run_id: str | None = None


class SubmissionCreated(BaseModel):
    id: int
    state: str
    url: str


class SubmissionOut(BaseModel):
    id: int
    state: Literal["queued", "running", "done", "failed"]
    model_id: str | None = None
    revision: str | None = None
    architecture: str | None = None
    run_id: str | None = None
    error: str | None = None
    created: datetime
    updated: datetime
    url: str
    results: list[ResultRecord] = Field(default_factory=list)
    model_type: str | None = None  # of the uploaded (or, once fetched, the Hub) config
    config_digest: str | None = None  # sha256 of the canonical config the run measured
    notes: list[str] = Field(default_factory=list)  # e.g. "auto_map ignored: ...", "non-finite values kept ..."
    queue_position: int | None = None  # 1 = next to run; only while queued


class ErrorBody(BaseModel):
    """Every error response: a JSON body, never an HTML page or a bare 500."""

    error: str
    detail: Any = None
    field: str | None = None  # the input to fix, for 422s on submissions
