"""The facade the worker uses to persist runs, results and op traces (sessions handled inside).

Ingest is idempotent: one row per (run, architecture, device, check); a re-delivered result replaces it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from compat.chains import Chain
from compat.decisions import DecisionEffect
from compat.identity import identity_of
from compat.lane import NewInRelease
from compat.lifecycle import DEFAULT_SILENCE_S
from compat.results import (
    PINNED_LANE,
    ArchitectureEntry,
    Check,
    DeviceInfo,
    OpTrace,
    Provenance,
    ResultRecord,
    RunInfo,
    Scope,
    Trigger,
)
from compat.states import RESUMABLE_STATES, RunState, SubmissionState
from service import db, history, runs
from service.lifecycle import reap, this_host
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
from service.records import aware, record_to_row, row_to_record
from service.rollup import run_counts
from service.run_fields import RUN_CATALOG_COLUMNS, catalog_columns, provenance_columns

RESULT_KEY = ("run_id", "architecture", "device", "check")


class RunStateError(ValueError):
    """A run cannot do what was asked in its state (resume a complete run, or one whose owner is alive)."""


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
                  planned: list[tuple[str, str, str]], *, owned: bool = True) -> str:
        """Record a run, its catalog and its planned result keys; calling it again for the same id is a no-op
        apart from adding keys/architectures not seen before. ``owned``: this process runs it (its host and pid are
        the owner, checked by ``reap``); a run fanned out to a broker has no owner process, only its heartbeat.
        Runs whose owner was lost are marked ``interrupted`` first (the "next start" of the lifecycle rule)."""
        dev = run.device
        now = datetime.now(UTC)
        with self.session() as s:
            reap(s)
            _upsert(s, Device, [{
                "name": dev.name, "simulated": dev.simulated, "description": dev.description,
                "torch_version": dev.torch_version, "backend_version": dev.backend_version,
                "details": dev.details,
            }], ["name"])
            existing = s.get(Run, run.id)
            if existing is None:
                prov = run.provenance
                mode = run.determinants.get("mode")
                ident = identity_of(dev.name, dev.details, None if mode is None else mode == "strict")
                s.add(Run(
                    id=run.id, trigger=str(run.trigger), device=dev.name, catalog_source=run.catalog_source,
                    snapshot_id=run.snapshot_id, versions=run.versions, checks=[str(c) for c in run.checks],
                    device_info=dev.model_dump(mode="json"), started=run.started, finished=run.finished,
                    state=RunState.RUNNING.value, **provenance_columns(prov), scope=str(run.scope),
                    owner_host=this_host() if owned else None, owner_pid=os.getpid() if owned else None,
                    heartbeat=now, identity=ident.label, profile=ident.profile, strict=ident.strict,
                    determinants=dict(run.determinants) or None, rerun_of=run.rerun_of, lane=run.lane,
                ))
                s.flush()
            if run.trigger != Trigger.SUBMISSION:
                # The catalog row is the sweeps' (rank, downloads, representative from the Hub); a submission's
                # entry (rank 1, whatever id was sent) lives on its run (run_architectures) and its submission only.
                _upsert(s, Architecture, [catalog_columns(a) for a in architectures], ["name"])
            _upsert(s, RunArchitecture, [{"run_id": run.id, **catalog_columns(a, RUN_CATALOG_COLUMNS)}
                                         for a in architectures], ["run_id", "architecture"])
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
            # In SQL, not read-modify-write: concurrent writers must each bump it. A stored result is a heartbeat.
            s.execute(update(Run).where(Run.id == run_id).values(data_version=Run.data_version + 1,
                                                                 heartbeat=datetime.now(UTC)))

    def heartbeat(self, run_id: str) -> None:
        """The owner is alive (the sweep ticks this every ``compat.lifecycle.HEARTBEAT_S``)."""
        with self.session() as s:
            s.execute(update(Run).where(Run.id == run_id).values(heartbeat=datetime.now(UTC)))

    def add_op_traces(self, run_id: str, traces: list[OpTrace]) -> None:
        by_arch = {t.architecture: t for t in traces}
        with self.session() as s:
            _upsert(s, OpTraceRow, [
                {"run_id": run_id, "architecture": t.architecture, "ops": list(t.ops)} for t in by_arch.values()
            ], ["run_id", "architecture"])

    def set_decisions(self, run_id: str, effects: list[DecisionEffect]) -> None:
        """Keep what each measured decision switch moves in the run (the headline's range); a second call replaces
        the first (a re-measure is the newer word, never merged with the old one)."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            run.decisions = [e.model_dump(mode="json") for e in effects]
            run.data_version = (run.data_version or 0) + 1  # page caches key on it: the range must show at once

    def set_chains(self, run_id: str, chains: list[Chain]) -> None:
        """Keep the run's measured blocker chains (``compat.chains``); a second call replaces the first."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            run.chains = [c.model_dump(mode="json") for c in chains]
            run.data_version = (run.data_version or 0) + 1  # page caches key on it

    def finish_run(self, run_id: str) -> str:
        """Close a run: ``complete`` only when every planned key has a result, else ``incomplete``."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            missing = runs.missing_count(s, run_id)
            run.state = (RunState.COMPLETE if missing == 0 else RunState.INCOMPLETE).value
            run.end_reason = None
            run.arch_count, run.supported_count, run.result_count = run_counts(s, run)
            run.data_version = (run.data_version or 0) + 1
            run.finished = datetime.now(UTC)
            return run.state

    def reap(self, *, silence_s: float = DEFAULT_SILENCE_S, run_id: str | None = None) -> list[tuple[str, str]]:
        """``compat runs reap``: mark runs whose owner is lost ``interrupted``; (run id, reason) of each."""
        with self.session() as s:
            return reap(s, silence_s=silence_s, run_id=run_id)

    def resume_run(self, run_id: str) -> tuple[RunInfo, list[tuple[str, str, str]], set[tuple[str, str, str]]]:
        """Take over an interrupted (or incomplete) run: this process becomes its owner and it is ``running`` again.
        Returns the run, its planned keys and the keys already stored (which a resume must not redo)."""
        with self.session() as s:
            reap(s, run_id=run_id)
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            if run.state not in RESUMABLE_STATES:
                why = "its owner is still running it" if run.state == RunState.RUNNING else "it has every result"
                raise RunStateError(f"run {run_id} is {run.state}: cannot resume ({why})")
            if run.trigger == str(Trigger.SUBMISSION):
                raise RunStateError(f"run {run_id} is a submission run: resubmit the model instead")
            planned = [tuple(k) for k in s.execute(
                select(PlannedResult.architecture, PlannedResult.device, PlannedResult.check)
                .where(PlannedResult.run_id == run_id))]
            stored = {tuple(k) for k in s.execute(
                select(Result.architecture, Result.device, Result.check).where(Result.run_id == run_id))}
            run.state, run.end_reason, run.finished = RunState.RUNNING.value, None, None
            run.owner_host, run.owner_pid, run.heartbeat = this_host(), os.getpid(), datetime.now(UTC)
            run.data_version = (run.data_version or 0) + 1
            info = RunInfo(id=run.id, trigger=Trigger(run.trigger), device=DeviceInfo(**(run.device_info or {})),
                           versions=run.versions or {}, catalog_source=run.catalog_source,
                           snapshot_id=run.snapshot_id, scope=Scope(run.scope or Scope.FULL),
                           checks=[Check(c) for c in run.checks or []], started=aware(run.started),
                           provenance=Provenance() if run.submission_id else None,
                           determinants=run.determinants or {}, rerun_of=run.rerun_of,
                           lane=run.lane or PINNED_LANE)
            return info, sorted(planned), stored

    def run_state(self, run_id: str) -> tuple[str, int, int]:
        """(state, planned results, missing results) of a run; the gate reads it."""
        with self.session() as s:
            reap(s, run_id=run_id)
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            return run.state, run.planned_count or 0, runs.missing_count(s, run_id)

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
        """Results of ``architecture`` per device from its latest finished run (``runs.latest_results_in``)."""
        with self.session() as s:
            return runs.latest_results_in(s, architecture, device)

    def baseline_run_id(self, run_id: str, trigger: str | None = None) -> str | None:
        """The run ``run_id`` is compared with (``runs.baseline_run``); None for the first one."""
        with self.session() as s:
            run = runs.baseline_run(s, run_id, trigger=trigger)
            return run.id if run is not None else None

    def determinants(self, run_id: str | None) -> dict[str, str] | None:
        """What ``run_id`` recorded as determining its results (``compat.moved``); None when it recorded nothing."""
        if run_id is None:
            return None
        with self.session() as s:
            run = s.get(Run, run_id)
            return dict(run.determinants) if run is not None and run.determinants else None

    def rerun_id(self, run_id: str) -> str | None:
        """The flake guard's re-run of ``run_id`` (``runs.rerun_of``); None when its regressions were not re-run."""
        with self.session() as s:
            return runs.rerun_of(s, run_id)

    def selection(self, run_id: str) -> list[str] | None:
        """The architectures a selection run planned (a diff compares only those); None for a full run."""
        with self.session() as s:
            return runs.selection_of(s, run_id)

    def submission(self, submission_id: int) -> dict | None:
        """A submission's input (model_id, revision, config, architecture, state) for the worker."""
        with self.session() as s:
            sub = s.get(Submission, submission_id)
            if sub is None:
                return None
            return {"id": sub.id, "model_id": sub.model_id, "revision": sub.revision, "config": sub.config,
                    "architecture": sub.architecture, "state": sub.state, "run_id": sub.run_id,
                    "config_digest": sub.config_digest, "notes": list(sub.notes or [])}

    def set_submission_state(self, submission_id: int, state: SubmissionState | str, *, run_id: str | None = None,
                             error: str | None = None, architecture: str | None = None,
                             config_digest: str | None = None, notes: list[str] | None = None,
                             config: dict | None = None) -> None:
        """Move a submission on; ``config``: the Hub config a run read, kept where no upload was (never replacing
        one), so ``compat repro --submission`` rebuilds what the run measured without the Hub."""
        if state not in set(SubmissionState):
            raise ValueError(f"unknown submission state {state!r}")
        with self.session() as s:
            sub = s.get(Submission, submission_id)
            if sub is None:
                raise KeyError(f"unknown submission {submission_id}")
            sub.state, sub.updated = SubmissionState(state).value, datetime.now(UTC)
            if run_id is not None:
                sub.run_id = run_id
            if architecture is not None:
                sub.architecture = architecture
            if config_digest is not None:  # a Hub id's config is known only once the worker fetched it
                sub.config_digest = config_digest
            if config is not None and sub.config is None:
                sub.config = config
            if notes:
                sub.notes = [*(sub.notes or []), *[n for n in notes if n not in (sub.notes or [])]]
            sub.error = error[:4000] if error else None

    def decisions(self, run_id: str) -> list[DecisionEffect]:
        """The run's measured decision switches (``set_decisions``); empty when none were measured (a ``Report``
        built from the store carries them as ``decisions``: ``[e.model_dump() for e in ...]``)."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            return [DecisionEffect(**d) for d in run.decisions or []]

    # -- notifications (worker/orchestration/notify.py) ----------------------------------------------------------

    def claim_notifications(self, run_id: str) -> bool:
        """Take the run's one notification turn: True for exactly one caller (the state goes from none to
        ``pending`` in one UPDATE), so racing finalizers and a following gate never notify twice."""
        with self.session() as s:
            done = s.execute(update(Run).where(Run.id == run_id, Run.notifications.is_(None))
                             .values(notifications={"state": "pending"}))
            return bool(done.rowcount)

    def set_notifications(self, run_id: str, state: dict) -> None:
        """What the run's notifications did (``notify.deliver``'s record), shown with the run."""
        with self.session() as s:
            s.execute(update(Run).where(Run.id == run_id).values(notifications=state))

    def notifications(self, run_id: str) -> dict | None:
        with self.session() as s:
            return s.scalar(select(Run.notifications).where(Run.id == run_id))

    def run_identity(self, run_id: str) -> dict:
        """The run's device, lane and library versions (what a notification and the lane's report name)."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"unknown run {run_id!r}")
            return {"device": run.identity or run.device, "lane": run.lane or PINNED_LANE,
                    "versions": dict(run.versions or {}),
                    "trigger": run.trigger, "catalog_source": run.catalog_source}

    def new_in_release(self, run_id: str) -> NewInRelease | None:
        """``service.history.new_in_release_of``: the run's architectures new in its transformers release."""
        with self.session() as s:
            return history.new_in_release_of(s, run_id)

    def run_catalog(self, run_id: str) -> list[str]:
        """The architectures a run was planned over (its catalog, or its selection)."""
        with self.session() as s:
            return list(s.scalars(select(RunArchitecture.architecture).where(RunArchitecture.run_id == run_id)))

    def op_traces(self, run_id: str) -> list[OpTrace]:
        with self.session() as s:
            rows = s.scalars(select(OpTraceRow).where(OpTraceRow.run_id == run_id).order_by(OpTraceRow.architecture))
            return [OpTrace(architecture=r.architecture, ops=r.ops or []) for r in rows]
