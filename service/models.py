"""SQLAlchemy 2.x typed ORM models of the results store (tables, keys, indexes).

Kept apart from the pydantic API schemas (``service/schemas.py``); migrations mirror these definitions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from compat.configjson import from_stored, to_stored
from compat.states import RunState, SubmissionState


class NonFiniteJSON(TypeDecorator):
    """JSON that keeps NaN/Infinity: stored tagged (``compat.configjson``), because PostgreSQL's json type refuses
    the bare tokens; read back as floats. The column stays plain JSON, so no migration is needed for it."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else to_stored(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else from_stored(value)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON}


class Device(Base):
    """A device under test; versions are the latest seen (each run keeps its own in ``Run.versions``)."""

    __tablename__ = "devices"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    description: Mapped[str] = mapped_column(String(256), default="")
    torch_version: Mapped[str] = mapped_column(String(64), default="")
    backend_version: Mapped[str] = mapped_column(String(64), default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    trigger: Mapped[str] = mapped_column(String(16), index=True)
    device: Mapped[str] = mapped_column(ForeignKey("devices.name"))
    catalog_source: Mapped[str] = mapped_column(String(64), default="registry")
    snapshot_id: Mapped[str | None] = mapped_column(String(128))
    versions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    checks: Mapped[list[str]] = mapped_column(JSON, default=list)
    device_info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    started: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # running -> complete | incomplete (finish_run) | interrupted (owner lost: service.lifecycle.reap);
    # interrupted -> running again on ``compat sweep --resume`` (migration 0007 indexes it: reads reap by it).
    state: Mapped[str] = mapped_column(String(16), default=RunState.RUNNING.value, index=True)
    planned_count: Mapped[int] = mapped_column(Integer, default=0)
    # Roll-ups written by finish_run so run lists and coverage history need not scan results.
    arch_count: Mapped[int | None] = mapped_column(Integer)
    supported_count: Mapped[int | None] = mapped_column(Integer)
    result_count: Mapped[int | None] = mapped_column(Integer)
    # Bumped by every write to the run; keys the in-process roll-up cache (service/rollup.py).
    data_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Submission runs: what was measured (migration 0006). A submission never writes the catalog row.
    submission_id: Mapped[int | None] = mapped_column(Integer)
    submitted_model_id: Mapped[str | None] = mapped_column(String(96))
    submitted_revision: Mapped[str | None] = mapped_column(String(128))
    config_digest: Mapped[str | None] = mapped_column(String(64))
    # Catalog scope (0007): "full" = every entry of its catalog, "selection" = --arch/--limit (never a headline).
    scope: Mapped[str] = mapped_column(String(16), default="full", server_default="full")
    # Owner (0007): the process that runs it; a dead owner or a silent heartbeat makes the run ``interrupted``.
    owner_host: Mapped[str | None] = mapped_column(String(256))
    owner_pid: Mapped[int | None] = mapped_column(Integer)
    heartbeat: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    end_reason: Mapped[str | None] = mapped_column(Text)  # why it was interrupted
    # The measured decision switches (0008): compat.decisions.DecisionEffect.model_dump() each, written once the
    # run's verdicts are in (Store.set_decisions); None = not measured. The headline's range is read from them.
    decisions: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # The device's identity (0012, compat.identity): name, profile and strict, e.g. "neuron (trn2)". Every latest,
    # headline, baseline and history read matches on it, never on the bare name.
    identity: Mapped[str] = mapped_column(String(96), default="", server_default="")
    profile: Mapped[str | None] = mapped_column(String(32))
    strict: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # What determines its results (0012, compat.moved); None: recorded before runs kept them (moves nothing).
    determinants: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The flake guard's re-run of that run's regressed keys (0012); the original is kept as it was.
    rerun_of: Mapped[str | None] = mapped_column(String(64), index=True)
    # Blocker chains (0015): compat.chains.Chain.model_dump() per architecture failing at an op, measured by moving
    # its blocking ops to the CPU fallback (Store.set_chains); None = not measured (only first blockers known).
    chains: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # The lane (0013): "pinned" (the project's pins) or e.g. "transformers-latest"; baselines stay within a lane.
    lane: Mapped[str] = mapped_column(String(32), default="pinned", server_default="pinned")
    # What the run's notifications did (0013): {"webhook": {...}, "github": {...}}; None = not tried.
    notifications: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    __table_args__ = (Index("ix_runs_device_started", "device", "started"),
                      Index("ix_runs_identity_started", "identity", "started"))


class Architecture(Base):
    """Catalog row as last seen; each run's own ranking is kept in ``RunArchitecture``."""

    __tablename__ = "architectures"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    model_type: Mapped[str] = mapped_column(String(128), default="")
    rank: Mapped[int] = mapped_column(Integer, index=True)
    downloads: Mapped[int] = mapped_column(Integer, default=0)
    representative: Mapped[str | None] = mapped_column(String(256))
    remote_code: Mapped[bool] = mapped_column(Boolean, default=False)


class RunArchitecture(Base):
    """The catalog a run was planned over (rank at that time): the denominator of its coverage."""

    __tablename__ = "run_architectures"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    architecture: Mapped[str] = mapped_column(String(128), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer)
    model_type: Mapped[str] = mapped_column(String(128), default="")
    representative: Mapped[str | None] = mapped_column(String(256))
    remote_code: Mapped[bool] = mapped_column(Boolean, default=False)
    downloads: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class PlannedResult(Base):
    """One expected (architecture, device, check) of a run; a run is complete when all have results."""

    __tablename__ = "planned_results"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    architecture: Mapped[str] = mapped_column(String(128), primary_key=True)
    device: Mapped[str] = mapped_column(String(64), primary_key=True)
    check: Mapped[str] = mapped_column(String(16), primary_key=True)


class Result(Base):
    __tablename__ = "results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    architecture: Mapped[str] = mapped_column(String(128))
    device: Mapped[str] = mapped_column(String(64))
    check: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(32))
    rank: Mapped[int | None] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any]] = mapped_column(NonFiniteJSON, default=dict)
    blocking_op: Mapped[str | None] = mapped_column(String(256))
    error_type: Mapped[str | None] = mapped_column(String(256))
    error_message: Mapped[str | None] = mapped_column(Text)
    error_traceback: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    fallback_ops: Mapped[list[str]] = mapped_column(JSON, default=list)
    has_fallback: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    known_issue: Mapped[str | None] = mapped_column(Text)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    peak_mem_mb: Mapped[float | None] = mapped_column(Float)
    repro: Mapped[str | None] = mapped_column(Text)
    log: Mapped[str | None] = mapped_column(Text)
    fp32_max_abs_err: Mapped[float | None] = mapped_column(Float)  # migration 0010
    fp32_cosine: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (
        # Idempotent ingest: a re-delivered result replaces the row with this key.
        UniqueConstraint("run_id", "architecture", "device", "check", name="uq_results_key"),
        # An architecture's history across runs (detail page, badge).
        Index("ix_results_arch_device", "architecture", "device"),
    )


class OpTraceRow(Base):
    __tablename__ = "op_traces"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    architecture: Mapped[str] = mapped_column(String(128), primary_key=True)
    ops: Mapped[list[str]] = mapped_column(JSON, default=list)


class Submission(Base):
    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[str | None] = mapped_column(String(96))
    revision: Mapped[str | None] = mapped_column(String(128))
    config: Mapped[dict[str, Any] | None] = mapped_column(NonFiniteJSON)
    architecture: Mapped[str | None] = mapped_column(String(128))
    config_digest: Mapped[str | None] = mapped_column(String(64))  # sha256 of the canonical config (0006)
    notes: Mapped[list[str] | None] = mapped_column(JSON)  # what validation noted: ignored auto_map, NaN kept (0006)
    # queued -> running -> done | failed
    state: Mapped[str] = mapped_column(String(16), default=SubmissionState.QUEUED.value)
    run_id: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    token_name: Mapped[str | None] = mapped_column(String(64))
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ApiToken(Base):
    """A bearer token; only the sha256 of the secret is stored, so a DB leak does not leak tokens."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class CatalogModel(Base):
    """A model of a catalog as a row (issue 33, migration 0011): the cited corpus or a Hub snapshot. Its verdict is
    its own tiny config's run (``run_id``: models whose tiny configs are identical share one run, keyed by
    ``tiny_digest``), read back under ``judged_as``; its plan is ``compat.plan.Plan`` from the full config."""

    __tablename__ = "catalog_models"

    model_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    device: Mapped[str] = mapped_column(String(64), primary_key=True)
    architecture: Mapped[str] = mapped_column(String(128), index=True)
    judged_as: Mapped[str | None] = mapped_column(String(128))
    model_type: Mapped[str] = mapped_column(String(128), default="")
    source: Mapped[str] = mapped_column(String(16), default="corpus")
    catalog: Mapped[str] = mapped_column(String(256), default="")
    sha: Mapped[str | None] = mapped_column(String(64))
    config_digest: Mapped[str] = mapped_column(String(64), default="")
    tiny_digest: Mapped[str | None] = mapped_column(String(80))
    downloads: Mapped[int | None] = mapped_column(Integer)
    trending: Mapped[float | None] = mapped_column(Float)
    cited: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    refusal: Mapped[str | None] = mapped_column(Text)
    config: Mapped[dict[str, Any] | None] = mapped_column(NonFiniteJSON)
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    run_id: Mapped[str | None] = mapped_column(String(64))
    updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))
