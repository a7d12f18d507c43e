"""The one result schema: statuses, checks, result records and the versioned JSON report.

The worker writes these records; the service ingests and serves them; neither keeps a private copy.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

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


# compile is opt-in: it costs far more than the other four together.
DEFAULT_CHECKS: tuple[Check, ...] = (Check.LOAD, Check.FORWARD, Check.GENERATE, Check.TRAIN)
ALL_CHECKS: tuple[Check, ...] = (*DEFAULT_CHECKS, Check.COMPILE)
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


class ArchitectureEntry(BaseModel):
    """One catalog row: an architecture and the model that represents it."""

    name: str  # the architectures[0] class name, e.g. "LlamaForCausalLM"
    model_type: str  # config.model_type, e.g. "llama"
    rank: int  # 1 = most downloaded (or registry order)
    downloads: int = 0
    representative: str | None = None  # Hub model id whose config is shrunk
    remote_code: bool = False  # needs trust_remote_code: listed, never executed
    config: dict[str, Any] | None = None  # the representative's config.json, when known


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


class OpTrace(BaseModel):
    """aten ops (with input dtypes) an architecture dispatches on the CPU reference."""

    architecture: str
    ops: list[str]  # e.g. ["aten::mm (Float)", "aten::histc (Long)"]


class Report(BaseModel):
    """The versioned JSON report written by ``compat sweep --json FILE``."""

    version: int = REPORT_VERSION
    run: RunInfo
    architectures: list[ArchitectureEntry] = Field(default_factory=list)
    results: list[ResultRecord] = Field(default_factory=list)
    op_traces: list[OpTrace] = Field(default_factory=list)


def is_supported(results: Iterable[ResultRecord]) -> bool:
    """Supported = every SUPPORT_CHECK present and passed (a pass with fallback still counts)."""
    by_check = {r.check: r.status for r in results}
    return all(by_check.get(c) == Status.PASS for c in SUPPORT_CHECKS)


def used_fallback(results: Iterable[ResultRecord]) -> bool:
    return any(r.fallback_ops for r in results if r.check in SUPPORT_CHECKS)
