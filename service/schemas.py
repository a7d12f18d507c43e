"""Pydantic response/request schemas of the REST API and the dashboard pages (apart from the ORM models).

``service.queries`` returns these; the API serialises them and the dashboard renders them, so both agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from compat.results import ResultRecord
from compat.states import SubmissionState

DECLARED_LABEL = "declared, not measured"


class CheckCoverage(BaseModel):
    check: str
    passed: int
    total: int
    fraction: float
    headline: str | None = None  # a check with its own headline (lora: "fine-tunes with LoRA"); never "supported"
    # Passed with no op on the CPU (compat.coverage.native_per_check): a forward run wholly on the device is a native
    # forward even when generate's argmax fell back.
    native: int = 0


class DecisionOut(BaseModel):
    """One measured decision switch of the device (compat.decisions.DecisionEffect) over the coverage's catalog."""

    key: str  # "switch=option[,switch=option]": the options measured, not the defaults
    switches: dict[str, str]
    subject: str
    confidence: str
    sources: list[str] = Field(default_factory=list)  # URL, or repo + path + commit
    measured_by: str  # "rerun" | "traces"
    affected: int = 0  # architectures looked at (the rest cannot move)
    moves: int = 0  # net change of the supported count
    native_moves: int = 0
    gains: list[str] = Field(default_factory=list)
    losses: list[str] = Field(default_factory=list)
    native_gains: list[str] = Field(default_factory=list)
    native_losses: list[str] = Field(default_factory=list)
    unmeasured: list[str] = Field(default_factory=list)  # no verdict in the re-run


class DeviceCoverage(BaseModel):
    """Headline of one device in one run: supported / total, per check, optionally over the top-N by rank."""

    device: str
    run_id: str
    run_started: datetime
    run_state: str
    simulated: bool = False
    top_n: int | None = None  # None over an unranked catalog: there is no "top N" of it
    total: int
    supported: int
    fraction: float
    percent: str = ""  # compat.results.percent: the one spelling of the share, e.g. "63.5%"
    supported_with_fallback: int = 0
    # Per-device report: out of the box (= supported, fallback allowed), native (no support-check op on the CPU),
    # failing (a device failure on a support check); ``profile``: the device's op-table profile, when it has one.
    native: int = 0
    native_percent: str = ""
    failing: int = 0
    profile: str | None = None
    strict: bool = False  # no CPU fallback; ``device`` is the identity (compat.identity), e.g. "neuron (trn2)"
    per_check: list[CheckCoverage] = Field(default_factory=list)
    # The headline's range across the run's measured decisions (compat.decisions.headline_range); without any,
    # low = high = supported and ``range_text`` is the plain head. ``range_text`` is the one spelling: show it as is.
    range_low: int = 0
    range_high: int = 0
    range_text: str = ""
    decisions: list[DecisionOut] = Field(default_factory=list)
    catalog_source: str = "registry"
    snapshot_id: str | None = None
    scope: str = "full"  # full, selection or submission (compat.results.Scope)
    ranked: bool = False  # the catalog is a ranking (Hub downloads); else Transformers' registry order
    scope_label: str = ""  # compat.results.scope_label: what the share is a share of


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
    # check -> the ops its record ran on the CPU fallback; a passing check not named here ran natively
    fallback_ops: dict[str, list[str]] = Field(default_factory=dict)
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
    kind: str = "sweep"  # compat.results.RunKind: a catalog sweep, or one submitted config
    device: str
    supported: bool
    statuses: dict[str, str]
    # A submission run's what-was-measured (None on sweeps).
    submission_id: int | None = None
    submitted_model_id: str | None = None
    submitted_revision: str | None = None
    config_digest: str | None = None


class ArchitectureDetail(BaseModel):
    name: str
    model_type: str = ""
    rank: int | None = None
    downloads: int = 0
    representative: str | None = None
    remote_code: bool = False
    latest: list[ResultRecord]  # per device, from its newest finished run that has this architecture
    latest_runs: dict[str, str] = Field(default_factory=dict)  # device -> the run ``latest`` came from
    supported: dict[str, bool]  # device -> supported in its newest run
    # device -> compat.verdict_text: "supported natively", "supported with CPU fallback: generate aten::argmax", ...
    verdicts: dict[str, str] = Field(default_factory=dict)
    history: list[HistoryPoint]  # catalog sweeps, newest first: what ``supported`` and ``latest`` are read from
    submitted: list[HistoryPoint] = Field(default_factory=list)  # submitted configs of it, newest first; never latest
    blocking_op: str | None = None
    error: str | None = None
    repro: str | None = None
    badge_url: str


class RunSummary(BaseModel):
    id: str
    trigger: str
    kind: str = "sweep"  # compat.results.RunKind: "sweep" (the catalog) or "submission" (one submitted config)
    submission_id: int | None = None
    device: str
    state: str
    started: datetime
    finished: datetime | None = None
    catalog_source: str
    snapshot_id: str | None = None
    scope: str = "full"  # full (the whole catalog), selection (--arch/--limit) or submission: only full is a headline
    scope_label: str = ""
    versions: dict[str, Any] = Field(default_factory=dict)
    checks: list[str] = Field(default_factory=list)
    planned: int
    results: int
    missing: int = 0  # planned results not stored
    total: int  # architectures in the run's catalog
    supported: int
    end_reason: str | None = None  # why an interrupted run was interrupted
    lane: str = "pinned"  # compat.results.PINNED_LANE, or a newer library's lane: its own identity and baseline
    # ``device`` is the identity (compat.identity: "neuron (trn2)"); ``device_name`` the torch device alone.
    device_name: str = ""
    profile: str | None = None
    strict: bool = False
    determinants: dict[str, str] = Field(default_factory=dict)  # compat.moved: what determines its results
    rerun_of: str | None = None  # the run whose regressed keys this run re-ran (the flake guard)
    rerun: str | None = None  # the flake guard's re-run of this run's regressed keys


class RunPage(BaseModel):
    items: list[RunSummary]
    total: int
    page: int
    per_page: int
    kind: str | None = None  # the kind listed (None: every kind)
    kinds: dict[str, int] = Field(default_factory=dict)  # runs of each kind under the same device/trigger/state


class RunDetail(RunSummary):
    device_info: dict[str, Any] = Field(default_factory=dict)
    status_counts: dict[str, int] = Field(default_factory=dict)
    result_list: list[ResultRecord] = Field(default_factory=list)
    # What the run's notifications did (worker/orchestration/notify.py): webhook / github state; None = not tried.
    notifications: dict[str, Any] | None = None
    # A registry sweep: "new in transformers X: ..." and those architectures (compat.lane; None: not a registry run).
    new_in_release: str | None = None
    new_architectures: list[str] = Field(default_factory=list)


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


class ArchitectureDiff(BaseModel):
    """Run a to run b by architecture, from ``compat.diff.diff_results`` (the gate's rule): an architecture
    regressed when some check of it passed in a and is a device failure in b; fixed when some check went from a
    device failure to pass and none regressed. Counts of checks are kept too (the gate prints them)."""

    a: str
    b: str
    regressions: list[DiffEntry]  # some check: pass in a, a failure status in b (changed_checks: those checks)
    fixes: list[DiffEntry]  # some check: a failure status in a, pass in b; none regressed
    new: list[DiffEntry]  # only in b
    removed: list[DiffEntry]  # only in a (within b's selection when b is a selection run)
    changed: list[DiffEntry] = Field(default_factory=list)  # other per-check status changes
    regressed_checks: int = 0
    fixed_checks: int = 0
    missing_checks: int = 0  # passed in a, no verdict or absent in b: never a regression
    # compat.diff.RunDiff's own rows: what moved between a and b (above the regressions), the confirmed
    # regressions and the flaky ones per check (a re-run in a fresh process passed: never gated on), and the new
    # failures' signatures. ``rerun``: the flake guard's re-run of b (None: b's regressions were not re-run).
    moved: list[dict[str, Any]] = Field(default_factory=list)
    regressed: list[dict[str, Any]] = Field(default_factory=list)
    flaky: list[dict[str, Any]] = Field(default_factory=list)
    flaky_checks: int = 0
    signatures: list[dict[str, Any]] = Field(default_factory=list)
    rerun: str | None = None


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
    top_n: int | None  # None over an unranked catalog
    total: int
    rows: list[DeclaredCoverageRow]
    run_id: str | None = None  # the full run whose catalog is the denominator
    ranked: bool = False
    scope_label: str = ""


class DeviceOut(BaseModel):
    name: str  # the identity (compat.identity), e.g. "neuron (trn2)": what ``device=`` takes
    simulated: bool
    description: str
    torch_version: str
    backend_version: str
    last_run_id: str | None = None
    device: str = ""  # the torch device alone, e.g. "neuron"
    profile: str | None = None
    strict: bool = False


class SubmissionCreated(BaseModel):
    id: int
    state: str
    url: str


class SubmissionVerdict(BaseModel):
    """A submission's verdict, by the architecture verdict's own rule (service.queries.verdict_of): ``word`` is
    compat.results' verdict (supported | supported_with_fallback | failing | reference_fail | skipped | not_judged),
    ``text`` its line ("supported with CPU fallback: generate aten::argmax", "failing: forward unsupported_op at
    aten::sort (Int)"); ``fallback_ops`` the support checks' ops run on the CPU; ``blocking_op`` the first blocker."""

    device: str
    word: str
    text: str
    fallback_ops: list[str] = Field(default_factory=list)
    blocking_op: str | None = None


class SubmissionOut(BaseModel):
    id: int
    state: SubmissionState
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
    uploaded: bool = False  # the submitter sent the config (else: the Hub id's, read by the run)
    verdict: SubmissionVerdict | None = None  # once its run has results (None while queued/running, or failed)


class ErrorBody(BaseModel):
    """Every error response: a JSON body, never an HTML page or a bare 500."""

    error: str
    detail: Any = None
    field: str | None = None  # the input to fix, for 422s on submissions


class RegressionEvent(BaseModel):
    """One regression of a run against its own baseline (``compat.history``)."""

    run_id: str
    baseline_run: str | None = None
    started: datetime
    device: str
    trigger: str
    lane: str
    architecture: str
    check: str
    before: str | None = None
    after: str | None = None
    detail: str = ""


class RegressedArchitecture(BaseModel):
    architecture: str
    regressions: int  # (run, check) pairs that regressed
    runs: int  # runs in which it regressed
    last: datetime
    last_run: str


class RegressionHistory(BaseModel):
    """``GET /api/v1/regressions?days=N``: what regressed in the last N days, newest first."""

    days: int
    since: datetime
    runs_examined: int
    events: list[RegressionEvent]
    architectures: list[RegressedArchitecture]
