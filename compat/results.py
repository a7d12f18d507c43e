"""The one result schema (statuses, checks, result records, the versioned JSON report) and the pure rules over it.

The worker writes these records; the service ingests and serves them; neither keeps a private copy. The rules
(supported, coverage, blockers) are pure functions of records, shared by every reader.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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


class Check(StrEnum):
    LOAD = "load"
    FORWARD = "forward"
    GENERATE = "generate"
    TRAIN = "train"
    COMPILE = "compile"
    LORA = "lora"  # peft LoRA on the attention projections, one AdamW step
    SFT = "sft"  # trl SFTTrainer, two steps
    FSDP = "fsdp"  # FSDP2 fully_shard over 2 ranks, one step
    TP = "tp"  # Transformers' tp_plan="auto" over 2 ranks, forward


# compile is opt-in: it costs far more than the other four together. So are the fine-tuning checks (issue 14).
DEFAULT_CHECKS: tuple[Check, ...] = (Check.LOAD, Check.FORWARD, Check.GENERATE, Check.TRAIN)
FINETUNE_CHECKS: tuple[Check, ...] = (Check.LORA, Check.SFT, Check.FSDP, Check.TP)
# Checks run by a 2-rank process group (worker/run/group.py) rather than in the architecture's own process.
DISTRIBUTED_CHECKS: tuple[Check, ...] = (Check.FSDP, Check.TP)
ALL_CHECKS: tuple[Check, ...] = (*DEFAULT_CHECKS, Check.COMPILE, *FINETUNE_CHECKS)
# The nightly sweep: the default checks plus the fine-tuning ones (compile stays opt-in, as before).
NIGHTLY_CHECKS: tuple[Check, ...] = (*DEFAULT_CHECKS, *FINETUNE_CHECKS)
# An architecture is *supported* on a device when these pass.
SUPPORT_CHECKS: tuple[Check, ...] = (Check.LOAD, Check.FORWARD, Check.GENERATE)


class Trigger(StrEnum):
    MANUAL = "manual"
    NIGHTLY = "nightly"
    SUBMISSION = "submission"


class ErrorInfo(BaseModel):
    type: str
    message: str
    traceback: str | None = None


class DeviceInfo(BaseModel):
    """Identity of the device under test, recorded with every run."""

    name: str  # torch device string: "neuron", "cpu", "cuda"
    simulated: bool = False
    description: str = ""  # e.g. "bundled simulation, profile torchneuron" or "NVIDIA H100"
    torch_version: str = ""
    backend_version: str = ""  # neuron_backend / torch_neuronx / CUDA version
    details: dict[str, Any] = Field(default_factory=dict)


# Configs carry non-finite floats (Nemotron-H's time_step_limit [0.0, Infinity]); pydantic's JSON mode would turn them
# into null. "constants" keeps them as floats in model_dump(mode="json") and writes Infinity/NaN in JSON text, which
# Python's json and pydantic's parser read back.
KEEP_NON_FINITE = ConfigDict(ser_json_inf_nan="constants")


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

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.architecture, self.device, str(self.check))


class Provenance(BaseModel):
    """What a submission run measured: the submitted Hub id and revision, and the digest of the config it ran."""

    submission_id: int | None = None
    model_id: str | None = None
    revision: str | None = None
    config_digest: str | None = None  # sha256 of the config as stored (compat.configjson.config_digest)


class RunInfo(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    trigger: Trigger = Trigger.MANUAL
    device: DeviceInfo
    versions: dict[str, str] = Field(default_factory=dict)  # torch, transformers, neuron_compat...
    catalog_source: str = "registry"
    snapshot_id: str | None = None
    checks: list[Check] = Field(default_factory=lambda: list(DEFAULT_CHECKS))
    started: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished: datetime | None = None
    provenance: Provenance | None = None  # submission runs only


class OpTrace(BaseModel):
    """aten ops (with input dtypes) an architecture dispatches on the CPU reference."""

    architecture: str
    ops: list[str]  # e.g. ["aten::mm (Float)", "aten::histc (Long)"]


class Report(BaseModel):
    """The versioned JSON report written by ``compat sweep --json FILE``."""

    model_config = KEEP_NON_FINITE

    version: int = REPORT_VERSION
    run: RunInfo
    architectures: list[ArchitectureEntry] = Field(default_factory=list)
    results: list[ResultRecord] = Field(default_factory=list)
    op_traces: list[OpTrace] = Field(default_factory=list)


def is_supported(results: Iterable[ResultRecord]) -> bool:
    """Supported = every SUPPORT_CHECK present and passed (a pass with fallback still counts)."""
    by_check = {r.check: r.status for r in results}
    return all(by_check.get(c) == Status.PASS for c in SUPPORT_CHECKS)


@dataclass(frozen=True)
class Headline:
    """A check's own headline, e.g. "fine-tunes with LoRA: 93% (120 of 129)"; never part of "supported"."""

    label: str
    passed: int  # architectures whose record for the check passed
    total: int  # architectures with a record for the check (the same base as "supported": every one in the run)

    @property
    def percent(self) -> float:
        return 100.0 * self.passed / self.total if self.total else 0.0

    def text(self) -> str:
        return f"{self.label}: {self.percent:.0f}% ({self.passed} of {self.total})"


HEADLINE_LABELS: dict[Check, str] = {Check.LORA: "fine-tunes with LoRA"}


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


def arch_verdict(records: list[ResultRecord]) -> str:
    """One word per architecture: supported | supported_with_fallback | failing | reference_fail | skipped |
    not_judged."""
    if is_supported(records):
        return "supported_with_fallback" if used_fallback(records) else "supported"
    support = [r for r in records if r.check in SUPPORT_CHECKS]
    if support and all(r.status == Status.SKIPPED for r in support):
        return "skipped"
    if any(r.status in FAILURE_STATUSES for r in support):
        return "failing"
    if any(r.status == Status.REFERENCE_FAIL for r in support):
        return "reference_fail"
    return "not_judged"  # a support check was not run (e.g. --checks load,forward): no verdict either way


@dataclass
class Coverage:
    architectures: int = 0
    verdicts: Counter = field(default_factory=Counter)  # arch_verdict -> count
    per_check: dict[str, Counter] = field(default_factory=dict)  # check -> status -> count
    known_failures: int = 0  # failing records explained by the known-issues file

    @property
    def supported(self) -> int:
        return self.verdicts["supported"] + self.verdicts["supported_with_fallback"]

    @property
    def runnable(self) -> int:
        """Architectures the device could be judged on (not skipped, reference did not fail)."""
        return self.architectures - self.verdicts["skipped"] - self.verdicts["reference_fail"]

    def pass_rate(self) -> float:
        return self.supported / self.architectures if self.architectures else 0.0

    def all_checks_pass(self, records: Iterable[ResultRecord]) -> int:
        """Architectures whose every recorded check passed (the cpu self-check's number)."""
        return sum(1 for recs in by_architecture(records).values() if all(r.status == Status.PASS for r in recs))


def coverage(records: Iterable[ResultRecord]) -> Coverage:
    records = list(records)
    cov = Coverage()
    groups = by_architecture(records)
    cov.architectures = len(groups)
    for recs in groups.values():
        cov.verdicts[arch_verdict(recs)] += 1
    for r in records:
        cov.per_check.setdefault(str(r.check), Counter())[str(r.status)] += 1
        if r.known_issue and r.status != Status.PASS:
            cov.known_failures += 1
    return cov


@dataclass
class Blocker:
    op: str  # aten::name (dtype spellings are in ``variants``)
    architectures: list[str]  # blocked (some failing support check names this op)
    unlocks: list[str]  # blocked by this op alone: implementing it would make them pass every blocked check
    variants: list[str]  # e.g. ["aten::histc (Long)"]
    checks: list[str]

    @property
    def message(self) -> str:
        return (f"implement {self.op} to unlock {len(self.unlocks)} architecture(s) "
                f"(blocks {len(self.architectures)})")


def blockers(records: Iterable[ResultRecord], *, checks: Iterable[Check] = tuple(ALL_CHECKS)) -> list[Blocker]:
    """Rank ops by how many architectures they block (ties: by how many they alone block, then name)."""
    wanted = set(checks)
    blocked: dict[str, set[str]] = defaultdict(set)
    variants: dict[str, set[str]] = defaultdict(set)
    in_checks: dict[str, set[str]] = defaultdict(set)
    ops_of_arch: dict[str, set[str]] = defaultdict(set)
    unexplained: set[str] = set()  # architectures with a failure that names no op: no single op unlocks them
    for r in records:
        if r.check not in wanted or r.status not in FAILURE_STATUSES:
            continue
        if not r.blocking_op:
            unexplained.add(r.architecture)
            continue
        op = r.blocking_op.split(" (")[0]
        blocked[op].add(r.architecture)
        variants[op].add(r.blocking_op)
        in_checks[op].add(str(r.check))
        ops_of_arch[r.architecture].add(op)
    out = []
    for op, archs in blocked.items():
        alone = sorted(a for a in archs if ops_of_arch[a] == {op} and a not in unexplained)
        out.append(Blocker(op, sorted(archs), alone, sorted(variants[op]), sorted(in_checks[op])))
    out.sort(key=lambda b: (-len(b.architectures), -len(b.unlocks), b.op))
    return out
