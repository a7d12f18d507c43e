"""The one result schema (statuses, checks, result records, the versioned JSON report) and the pure rules over it.

The worker writes these records; the service ingests and serves them; neither keeps a private copy. The per-record
and per-architecture read rules (supported, verdict, the share's spelling) are pure functions here, the counts over a
run in compat/coverage.py; every reader shares them: the CLI, the nightly gate, the API and the pages
(docs/ARCHITECTURE.md, "Read rules").
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The checks and their per-check lists live in compat/checks.py (one row per check); re-exported here, where every
# reader has always found them.
from compat.checks import (  # noqa: F401 - re-exported
    ALL_CHECKS,
    CHECK_ORDER,
    DEFAULT_CHECKS,
    DISTRIBUTED_CHECKS,
    FINETUNE_CHECKS,
    HEADLINE_LABELS,
    NIGHTLY_CHECKS,
    SUPPORT_CHECKS,
    Check,
)

REPORT_VERSION = 1


class Status(StrEnum):
    """Outcome of one (architecture, device, check)."""

    PASS = "pass"
    MISMATCH = "mismatch"  # ran, but numerics disagree with the CPU reference beyond tolerance
    UNSUPPORTED_OP = "unsupported_op"  # the device has no kernel for an op (names op + dtypes)
    UNSUPPORTED_DTYPE = "unsupported_dtype"  # the op exists, not for this dtype
    OOM = "oom"
    ERROR = "error"  # any other exception (class, message, short traceback)
    CRASH = "crash"  # the worker process died (signal)
    TIMEOUT = "timeout"
    REFERENCE_FAIL = "reference_fail"  # the CPU reference itself failed: never blamed on the device
    SKIPPED = "skipped"  # not run (reason says why: remote code, earlier check failed, ...)
    HARNESS_ERROR = "harness_error"  # the harness's own fault (shrinker, builder, limits): neither device nor CPU


FAILURE_STATUSES = frozenset(
    {Status.MISMATCH, Status.UNSUPPORTED_OP, Status.UNSUPPORTED_DTYPE, Status.OOM, Status.ERROR,
     Status.CRASH, Status.TIMEOUT}
)

# Statuses that say nothing about the device: the CPU reference failed, the harness failed, or the check did not run.
# Never a failure, never a regression, never a blocker.
NO_VERDICT_STATUSES = frozenset({Status.REFERENCE_FAIL, Status.HARNESS_ERROR, Status.SKIPPED})


class Scope(StrEnum):
    """How much of its catalog a run covered: every entry (``full``), or a selection (``--arch``, ``--limit``); a
    ``submission`` run measured one submitted config, no catalog at all."""

    FULL = "full"
    SELECTION = "selection"
    SUBMISSION = "submission"


# Catalog sources whose order is a ranking (Hub downloads); the registry is Transformers' own order, unranked.
RANKED_SOURCES = frozenset({"hub", "snapshot"})
UNRANKED_LABEL = "unranked: Transformers' registry, alphabetical"


def is_ranked(catalog_source: str) -> bool:
    return catalog_source in RANKED_SOURCES


def scope_label(catalog_source: str, snapshot_id: str | None, scope: str, size: int,
                provenance: Provenance | None = None) -> str:
    """What a run's numbers are a share of, in words: shown next to every headline. A submission run names what
    was submitted when ``provenance`` (the run's submission id, Hub id, revision, config digest) is given."""
    if scope == Scope.SUBMISSION:
        return submission_label(provenance)
    if scope == Scope.SELECTION:
        return f"selection of {size} architecture(s), not the headline"
    if not is_ranked(catalog_source):
        return UNRANKED_LABEL
    return f"Hub ranking by downloads, snapshot {snapshot_id or 'live'}"


def submission_label(provenance: Provenance | None) -> str:
    """A submission run in words: 'submission #12: org/model@rev (config sha256 abcd1234ef01…)', or 'uploaded
    config.json' in place of the Hub id for an upload."""
    if provenance is None:
        return "submission: one submitted config, not the headline"
    what = provenance.model_id or "uploaded config.json"
    if provenance.model_id and provenance.revision:
        what += f"@{provenance.revision}"
    number = f" #{provenance.submission_id}" if provenance.submission_id is not None else ""
    digest = f" (config sha256 {provenance.config_digest[:12]}…)" if provenance.config_digest else ""
    return f"submission{number}: {what}{digest}"


class Trigger(StrEnum):
    MANUAL = "manual"
    NIGHTLY = "nightly"
    SUBMISSION = "submission"


class RunKind(StrEnum):
    """What a run measured: the catalog (a sweep, manual or nightly) or one submitted config."""

    SWEEP = "sweep"
    SUBMISSION = "submission"


def run_kind(trigger: str) -> RunKind:
    return RunKind.SUBMISSION if trigger == Trigger.SUBMISSION else RunKind.SWEEP


LAZY = ConfigDict(defer_build=True)


class ErrorInfo(BaseModel):
    model_config = LAZY

    type: str
    message: str
    traceback: str | None = None


class DeviceInfo(BaseModel):
    """Identity of the device under test, recorded with every run."""

    model_config = LAZY

    name: str  # torch device string: "neuron", "cpu", "cuda"
    simulated: bool = False
    description: str = ""  # e.g. "bundled simulation, profile trn2" or "NVIDIA H100"
    torch_version: str = ""
    backend_version: str = ""  # neuron_backend / torch_neuronx / CUDA version
    details: dict[str, Any] = Field(default_factory=dict)


# Configs carry non-finite floats (Nemotron-H's time_step_limit [0.0, Infinity]); pydantic's JSON mode would turn them
# into null. "constants" keeps them as floats in model_dump(mode="json") and writes Infinity/NaN in JSON text, which
# Python's json and pydantic's parser read back.
KEEP_NON_FINITE = ConfigDict(ser_json_inf_nan="constants", defer_build=True)


class ArchitectureEntry(BaseModel):
    """One catalog row: an architecture and the model that represents it."""

    model_config = KEEP_NON_FINITE

    name: str  # the architectures[0] class name, e.g. "LlamaForCausalLM"
    model_type: str  # config.model_type, e.g. "llama"
    rank: int  # 1 = most downloaded (or registry order)
    downloads: int = 0
    representative: str | None = None  # Hub model id whose config is shrunk
    remote_code: bool = False  # needs trust_remote_code: listed, never executed
    config: dict[str, Any] | None = None  # the representative's config.json, when known
    notes: list[str] = Field(default_factory=list)  # what the remote-code rule said (an ignored auto_map, why remote)


class ResultRecord(BaseModel):
    """One (architecture, device, check) outcome."""

    model_config = LAZY

    architecture: str
    rank: int | None = None
    device: str
    check: Check
    status: Status
    metrics: dict[str, Any] = Field(default_factory=dict)
    blocking_op: str | None = None  # first aten op that blocked it, e.g. "aten::histc (Long)"
    error: ErrorInfo | None = None
    reason: str | None = None  # for skipped / reference_fail / known issues
    fallback_ops: list[str] = Field(default_factory=list)  # ops that ran on CPU fallback
    known_issue: str | None = None  # link/reason from the known-issues file when expected
    duration_s: float = 0.0
    peak_mem_mb: float | None = None
    repro: str | None = None  # command that reproduces this result
    log: str | None = None  # captured stdout/stderr of the architecture run
    # forward/compile: the device's logits against the plain fp32 CPU run (no bf16 emulation), what `compat repro`
    # prints. The judged error (metrics max_abs_err/cosine) is against the CPU at the device's modelled precision
    # (policy bf16_matmul: matmul operands rounded to bf16), which on the simulated device runs the same kernels
    # with the same rounding and so is 0; this is what that rounding costs. None: not measured (older records).
    fp32_max_abs_err: float | None = None
    fp32_cosine: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.architecture, self.device, str(self.check))


class Provenance(BaseModel):
    """What a submission run measured: the submitted Hub id and revision, and the digest of the config it ran."""

    model_config = LAZY

    submission_id: int | None = None
    model_id: str | None = None
    revision: str | None = None
    config_digest: str | None = None  # sha256 of the config as stored (compat.configjson.config_digest)


# The run's lane: the project's exact pins, or a newer library installed over them (its own identity and baseline).
PINNED_LANE = "pinned"
TRANSFORMERS_LATEST_LANE = "transformers-latest"


class RunInfo(BaseModel):
    model_config = LAZY

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    trigger: Trigger = Trigger.MANUAL
    device: DeviceInfo
    versions: dict[str, str] = Field(default_factory=dict)  # torch, transformers, neuron_compat...
    catalog_source: str = "registry"
    snapshot_id: str | None = None
    scope: Scope = Scope.FULL  # the whole catalog, or a selection of it (never a headline)
    lane: str = PINNED_LANE  # pinned, or transformers-latest: its own identity and baseline (COMPAT_LANE)
    checks: list[Check] = Field(default_factory=lambda: list(DEFAULT_CHECKS))
    started: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished: datetime | None = None
    provenance: Provenance | None = None  # submission runs only
    # How the run ended (running | complete | incomplete | interrupted) and how many planned results it lacks;
    # written into the JSON report when the run closes (None: not known, e.g. a report written mid-run).
    state: str | None = None
    missing: int | None = None
    # What determines its results (compat.moved: library versions, device backend, profile and its sources' digest,
    # switches, strict or fallback, harness version), recorded when it starts; a diff names what moved.
    determinants: dict[str, str] = Field(default_factory=dict)
    # The flake guard's re-run of another run's regressed keys in a fresh process (issue 34 item 1): that run's id.
    rerun_of: str | None = None


class OpTrace(BaseModel):
    """aten ops (with input dtypes) an architecture dispatches on the CPU reference."""

    model_config = LAZY

    architecture: str
    ops: list[str]  # e.g. ["aten::mm (Float)", "aten::histc (Long)"]
    # The ops of the support checks' references alone (forward and generate parts; train's are only in ``ops``): what
    # the decisions phase reads to skip re-runs a switch cannot change (compat/decision_work.py). None: not recorded
    # (generate did not run its reference, or a trace read back from the store, which keeps ``ops`` only).
    support_ops: list[str] | None = None


class Report(BaseModel):
    """The versioned JSON report written by ``compat sweep --json FILE``."""

    model_config = KEEP_NON_FINITE

    version: int = REPORT_VERSION
    run: RunInfo
    architectures: list[ArchitectureEntry] = Field(default_factory=list)
    results: list[ResultRecord] = Field(default_factory=list)
    op_traces: list[OpTrace] = Field(default_factory=list)
    # compat.decisions.DecisionEffect.model_dump() per measured switch (that module builds on this one's records)
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    # compat.chains.Chain.model_dump() per architecture failing at an op, measured on the simulated device
    chains: list[dict[str, Any]] = Field(default_factory=list)


def is_supported_statuses(statuses: Mapping[str, str]) -> bool:
    """Supported = every SUPPORT_CHECK present and passed (a pass with fallback still counts); other checks
    (train, compile, the fine-tuning checks) never enter it. ``statuses``: check -> status, as strings."""
    return all(statuses.get(str(c)) == Status.PASS.value for c in SUPPORT_CHECKS)


def statuses_of(results: Iterable[ResultRecord]) -> dict[str, str]:
    return {str(r.check): str(r.status) for r in results}


def is_supported(results: Iterable[ResultRecord]) -> bool:
    return is_supported_statuses(statuses_of(results))


@dataclass(frozen=True)
class Headline:
    """A check's own headline, e.g. "fine-tunes with LoRA: 93.0% (120 of 129)"; never part of "supported"."""

    label: str
    passed: int  # architectures whose record for the check passed
    total: int  # architectures with a record for the check (the same base as "supported": every one in the run)

    @property
    def percent(self) -> float:
        return 100.0 * self.passed / self.total if self.total else 0.0

    def text(self) -> str:
        return f"{self.label}: {percent(self.passed, self.total)} ({self.passed} of {self.total})"


def headline_label(check: Check | str) -> str | None:
    """The headline's wording for a check that has its own (lora: "fine-tunes with LoRA"), else None."""
    return HEADLINE_LABELS.get(Check(check)) if check in {str(c) for c in Check} else None


def headline_of(statuses: Iterable[Status | str], check: Check = Check.LORA) -> Headline:
    """The headline over one status per architecture (its record for ``check``): passed / all of them."""
    statuses = [str(s) for s in statuses]
    label = headline_label(check) or f"passes {check}"
    return Headline(label, sum(1 for s in statuses if s == Status.PASS), len(statuses))


def check_headline(records: Iterable[ResultRecord], check: Check = Check.LORA) -> Headline | None:
    """The headline of one opt-in check (default: "fine-tunes with LoRA: N%"), or None when no record has it.

    Kept apart from ``is_supported`` on purpose: supported stays load+forward+generate (issue 14)."""
    status = {r.architecture: r.status for r in records if r.check == check}
    return headline_of(status.values(), check) if status else None


def used_fallback(results: Iterable[ResultRecord]) -> bool:
    return any(r.fallback_ops for r in results if r.check in SUPPORT_CHECKS)


def failure_records(entry: ArchitectureEntry, device: str, checks: Iterable[Check], status: Status, reason: str,
                    **fields: Any) -> list[ResultRecord]:
    """One record per check that ended without a verdict of its own (build refused, reference failed, worker
    stopped, runner raised...): the same status and reason for each, plus any other record ``fields``."""
    return [ResultRecord(architecture=entry.name, rank=entry.rank, device=device, check=c, status=status,
                         reason=reason, **fields) for c in checks]


def by_architecture(records: Iterable[ResultRecord]) -> dict[str, list[ResultRecord]]:
    out: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in records:
        out[r.architecture].append(r)
    return dict(out)


def verdict(statuses: Mapping[str, str], fallback: bool = False) -> str:
    """One word per architecture from its check -> status map: supported | supported_with_fallback | failing |
    reference_fail | skipped | not_judged. harness_error and reference_fail are never ``failing``."""
    if is_supported_statuses(statuses):
        return "supported_with_fallback" if fallback else "supported"
    support = [statuses[str(c)] for c in SUPPORT_CHECKS if str(c) in statuses]
    if support and all(s == Status.SKIPPED.value for s in support):
        return "skipped"
    if any(Status(s) in FAILURE_STATUSES for s in support):
        return "failing"
    if any(s == Status.REFERENCE_FAIL.value for s in support):
        return "reference_fail"
    return "not_judged"  # a support check was not run, or ended harness_error: no verdict either way


def arch_verdict(records: list[ResultRecord]) -> str:
    return verdict(statuses_of(records), used_fallback(records))


def percent(supported: int, total: int) -> str:
    """The one spelling of a headline share, everywhere (CLI, pages, README): one decimal, e.g. ``63.5%``."""
    return f"{100 * supported / total:.1f}%" if total else "0.0%"
