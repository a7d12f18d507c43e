"""The facade the worker uses to persist runs, results and op traces (sessions handled inside).

Ingest is idempotent: one row per (run, architecture, device, check); a re-delivered result replaces it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from compat.results import (
    ArchitectureEntry,
    ErrorInfo,
    OpTrace,
    ResultRecord,
    RunInfo,
    Trigger,
)
from service import db
from service.models import (
    Architecture,
    Device,
    OpTraceRow,
    PlannedResult,
    Result,
    Run,
    RunArchitecture,
    Submission,
)
from service.rollup import run_counts

RESULT_KEY = ("run_id", "architecture", "device", "check")
SUBMISSION_STATES = ("queued", "running", "done", "failed")


def aware(value: datetime | None) -> datetime | None:
    """SQLite drops tzinfo; every stored time is UTC, so put it back."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def record_to_row(run_id: str, rec: ResultRecord) -> dict:
    return {
        "run_id": run_id,
        "architecture": rec.architecture,
        "device": rec.device,
        "check": str(rec.check),
        "status": str(rec.status),
        "rank": rec.rank,
        "metrics": rec.metrics,
        "blocking_op": rec.blocking_op,
        "error_type": rec.error.type if rec.error else None,
        "error_message": rec.error.message if rec.error else None,
        "error_traceback": rec.error.traceback if rec.error else None,
        "reason": rec.reason,
        "fallback_ops": list(rec.fallback_ops),
        "has_fallback": bool(rec.fallback_ops),
        "known_issue": rec.known_issue,
        "duration_s": rec.duration_s,
        "peak_mem_mb": rec.peak_mem_mb,
        "repro": rec.repro,
        "log": rec.log,
    }


def row_to_record(row: Result) -> ResultRecord:
    error = None
    if row.error_type is not None or row.error_message is not None:
        error = ErrorInfo(type=row.error_type or "", message=row.error_message or "",
                          traceback=row.error_traceback)
    return ResultRecord(
        architecture=row.architecture, rank=row.rank, device=row.device, check=row.check,
        status=row.status, metrics=row.metrics or {}, blocking_op=row.blocking_op, error=error,
        reason=row.reason, fallback_ops=row.fallback_ops or [], known_issue=row.known_issue,
        duration_s=row.duration_s, peak_mem_mb=row.peak_mem_mb, repro=row.repro, log=row.log,
    )


def _upsert(session: Session, model: type, rows: list[dict], key: Iterable[str]) -> None:
    """INSERT ... ON CONFLICT (key) DO UPDATE: atomic even when two writers deliver the same key."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    insert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}.get(dialect)
    key = list(key)
    if insert is None:  # other backends: read-modify-write (not atomic, but correct single-writer)
        for row in rows:
            pk = {k: row[k] for k in key}
            existing = session.execute(select(model).filter_by(**pk)).scalar_one_or_none()
            if existing is None:
                session.add(model(**row))
            else:
                for k, v in row.items():
                    setattr(existing, k, v)
        return
    stmt = insert(model)
    updates = {c: stmt.excluded[c] for c in rows[0] if c not in key}
    stmt = stmt.on_conflict_do_update(index_elements=key, set_=updates) if updates else \
        stmt.on_conflict_do_nothing(index_elements=key)
    # Chunk so large batches stay under SQLite's bound-parameter limit.
    for i in range(0, len(rows), 200):
        session.execute(stmt, rows[i:i + 200])


class Store:
    """Persist and read back harness results; each method is one transaction."""

    def __init__(self, database_url: str | None = None, *, migrate: bool = True) -> None:
        self.database_url = db.resolve_url(database_url)
        if migrate:
            db.upgrade(self.database_url)

    def session(self):  # noqa: ANN201 - context manager of Session
        return db.session_scope(self.database_url)

    def dispose(self) -> None:
        """Close this store's pooled connections (a process that forks must not hand them to its children);
        the next use opens new ones."""
        db.dispose_engine(self.database_url)

    # -- writes ---------------------------------------------------------------------------------

    def start_run(self, run: RunInfo, architectures: list[ArchitectureEntry],
                  planned: list[tuple[str, str, str]]) -> str:
        """Record a run, its catalog and its planned result keys; calling it again for the same id is a no-op
        apart from adding keys/architectures not seen before."""
        dev = run.device
        with self.session() as s:
            _upsert(s, Device, [{
                "name": dev.name, "simulated": dev.simulated, "description": dev.description,
                "torch_version": dev.torch_version, "backend_version": dev.backend_version,
                "details": dev.details,
            }], ["name"])
            existing = s.get(Run, run.id)
            if existing is None:
                prov = run.provenance
                s.add(Run(
                    id=run.id, trigger=str(run.trigger), device=dev.name, catalog_source=run.catalog_source,
                    snapshot_id=run.snapshot_id, versions=run.versions, checks=[str(c) for c in run.checks],
                    device_info=dev.model_dump(mode="json"), started=run.started, finished=run.finished,
                    state="running", submission_id=prov.submission_id if prov else None,
                    submitted_model_id=prov.model_id if prov else None,
                    submitted_revision=prov.revision if prov else None,
                    config_digest=prov.config_digest if prov else None,
                ))
                s.flush()
            if run.trigger != Trigger.SUBMISSION:
                # The catalog row is the sweeps' (rank, downloads, representative from the Hub); a submission's
                # entry (rank 1, whatever id was sent) lives on its run (run_architectures) and its submission only.
                _upsert(s, Architecture, [{
                    "name": a.name, "model_type": a.model_type, "rank": a.rank, "downloads": a.downloads,
                    "representative": a.representative, "remote_code": a.remote_code,
                } for a in architectures], ["name"])
            _upsert(s, RunArchitecture, [{
                "run_id": run.id, "architecture": a.name, "rank": a.rank, "model_type": a.model_type,
                "representative": a.representative, "remote_code": a.remote_code, "downloads": a.downloads,
            } for a in architectures], ["run_id", "architecture"])
            keys = sorted({(a, d, str(c)) for a, d, c in planned})
            _upsert(s, PlannedResult, [
                {"run_id": run.id, "architecture": a, "device": d, "check": c} for a, d, c in keys
            ], RESULT_KEY)
            s.flush()
            run_row = s.get(Run, run.id)
            run_row.data_version = (run_row.data_version or 0) + 1
            run_row.planned_count = s.scalar(
                select(func.count()).select_from(PlannedResult).where(PlannedResult.run_id == run.id))
        return run.id

    def add_results(self, run_id: str, records: list[ResultRecord]) -> None:
        """Upsert results; the last delivery of a key wins."""
        # Within one batch keep only the last record per key (ON CONFLICT cannot touch a row twice).
        by_key = {r.key: r for r in records}
        with self.session() as s:
            if s.get(Run, run_id) is None:
                raise KeyError(f"unknown run {run_id!r}: call start_run first")
            _upsert(s, Result, [record_to_row(run_id, r) for r in by_key.values()], RESULT_KEY)
            # In SQL, not read-modify-write: concurrent writers must each bump it.
            s.execute(update(Run).where(Run.id == run_id).values(data_version=Run.data_version + 1))

    def add_op_traces(self, run_id: str, traces: list[OpTrace]) -> None:
        by_arch = {t.architecture: t for t in traces}
        with self.session() as s:
            _upsert(s, OpTraceRow, [
                {"run_id": run_id, "architecture": t.architecture, "ops": list(t.ops)} for t in by_arch.values()
            ], ["run_id", "architecture"])

    def finish_run(self, run_id: str) -> str:
        """Close a run: ``complete`` only when every planned key has a result, else ``incomplete``."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            missing = s.scalar(
                select(func.count()).select_from(PlannedResult).outerjoin(
                    Result,
                    (Result.run_id == PlannedResult.run_id) & (Result.architecture == PlannedResult.architecture)
                    & (Result.device == PlannedResult.device) & (Result.check == PlannedResult.check),
                ).where(PlannedResult.run_id == run_id, Result.id.is_(None))
            )
            run.state = "complete" if missing == 0 else "incomplete"
            run.arch_count, run.supported_count, run.result_count = run_counts(s, run)
            run.data_version = (run.data_version or 0) + 1
            run.finished = datetime.now(UTC)
            return run.state

    # -- reads ----------------------------------------------------------------------------------

    def run_results(self, run_id: str) -> list[ResultRecord]:
        with self.session() as s:
            rows = s.scalars(select(Result).where(Result.run_id == run_id)
                             .order_by(Result.rank.nulls_last(), Result.architecture, Result.device, Result.id))
            return [row_to_record(r) for r in rows]

    def stored_pairs(self, run_id: str) -> set[tuple[str, str]]:
        """(architecture, device) pairs of the run that have results: one narrow query, not every record with its
        log (the worker asks for each task, so reading whole runs would grow quadratically with the catalog)."""
        with self.session() as s:
            rows = s.execute(select(Result.architecture, Result.device).distinct().where(Result.run_id == run_id))
            return {(arch, dev) for arch, dev in rows}

    def latest_results(self, architecture: str, device: str | None = None) -> list[ResultRecord]:
        """Results of ``architecture`` from the newest run that has any, per device (submission runs,
        which measure a submitter's own config, are not counted)."""
        with self.session() as s:
            return latest_results_in(s, architecture, device)

    def last_run_id(self, device: str, trigger: str | None = None, before: str | None = None) -> str | None:
        """Newest run on ``device`` (optionally of one trigger, optionally started before run ``before``)."""
        with self.session() as s:
            q = select(Run.id).where(Run.device == device)
            if trigger is not None:
                q = q.where(Run.trigger == str(trigger))
            if before is not None:
                pivot = s.get(Run, before)
                if pivot is None:
                    return None
                q = q.where((Run.started < pivot.started) | ((Run.started == pivot.started) & (Run.id < pivot.id)))
            return s.scalar(q.order_by(Run.started.desc(), Run.id.desc()).limit(1))

    def submission(self, submission_id: int) -> dict | None:
        """A submission's input (model_id, revision, config, architecture, state) for the worker."""
        with self.session() as s:
            sub = s.get(Submission, submission_id)
            if sub is None:
                return None
            return {"id": sub.id, "model_id": sub.model_id, "revision": sub.revision, "config": sub.config,
                    "architecture": sub.architecture, "state": sub.state, "run_id": sub.run_id,
                    "config_digest": sub.config_digest, "notes": list(sub.notes or [])}

    def set_submission_state(self, submission_id: int, state: str, *, run_id: str | None = None,
                             error: str | None = None, architecture: str | None = None,
                             config_digest: str | None = None, notes: list[str] | None = None) -> None:
        if state not in SUBMISSION_STATES:
            raise ValueError(f"unknown submission state {state!r}")
        with self.session() as s:
            sub = s.get(Submission, submission_id)
            if sub is None:
                raise KeyError(f"unknown submission {submission_id}")
            sub.state, sub.updated = state, datetime.now(UTC)
            if run_id is not None:
                sub.run_id = run_id
            if architecture is not None:
                sub.architecture = architecture
            if config_digest is not None:  # a Hub id's config is known only once the worker fetched it
                sub.config_digest = config_digest
            if notes:
                sub.notes = [*(sub.notes or []), *[n for n in notes if n not in (sub.notes or [])]]
            sub.error = error[:4000] if error else None

    def op_traces(self, run_id: str) -> list[OpTrace]:
        with self.session() as s:
            rows = s.scalars(select(OpTraceRow).where(OpTraceRow.run_id == run_id).order_by(OpTraceRow.architecture))
            return [OpTrace(architecture=r.architecture, ops=r.ops or []) for r in rows]


def latest_results_in(session: Session, architecture: str, device: str | None = None) -> list[ResultRecord]:
    q = (select(Result.device, Result.run_id).join(Run, Run.id == Result.run_id)
         .where(Result.architecture == architecture, Run.trigger != str(Trigger.SUBMISSION)))
    if device is not None:
        q = q.where(Result.device == device)
    newest: dict[str, str] = {}
    for dev, run_id in session.execute(q.order_by(Run.started.desc(), Run.id.desc())):
        newest.setdefault(dev, run_id)
    out: list[ResultRecord] = []
    for dev, run_id in sorted(newest.items()):
        rows = session.scalars(select(Result).where(
            Result.run_id == run_id, Result.architecture == architecture, Result.device == dev).order_by(Result.id))
        out.extend(row_to_record(r) for r in rows)
    return out
