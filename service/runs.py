"""Which run a read is about: a device's latest and headline run, a run's baseline, its records and completeness;
an architecture's latest results. The run-selection half of the read rules (docs/ARCHITECTURE.md, "Read rules"):

- a device is its identity (``compat.identity``): name, profile and strict, e.g. ``neuron (trn2)``; a plain name
  (``neuron``) names its default profile with the fallback on, or its only stored identity;
- latest run of a device = its newest *finished* (complete or incomplete) non-submission run, per trigger and
  catalog scope; the headline = the latest *full* run (a selection run is shown as what it is, never the headline);
  the flake guard's re-runs are never "latest": they belong to the run they re-ran;
- baseline of a run = the newest finished run before it of the same identity, trigger and catalog ranking; a full
  run is compared with a full one, a selection run over its own selection.
  Headlines read the pinned lane (``compat.results.PINNED_LANE``); baselines stay within a lane: a
  newest-Transformers lane run is its own identity, never a headline.

Used by ``service.queries`` (the API's and the pages' reads) and by ``service.store`` (the CLI's and the gate's).
"""

from __future__ import annotations

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from compat import identity
from compat.model_rows import CORPUS_SOURCE
from compat.results import PINNED_LANE, ResultRecord, Scope, Trigger, is_ranked, scope_label
from compat.states import FINISHED_STATES
from service.lifecycle import reap
from service.models import Device, PlannedResult, Result, Run, RunArchitecture
from service.records import checked_fields, from_columns, row_to_record, select_columns
from service.run_fields import provenance_of

_ORDER = (Run.started.desc(), Run.id.desc())
# compat.results.run_kind in SQL: a run of one submitted config, not of the catalog.
IS_SUBMISSION = Run.trigger == str(Trigger.SUBMISSION)
# A run every "latest" and "baseline" read may choose: finished (complete or incomplete), not a submission, not a
# flake guard's re-run.
_FINISHED_SWEEP = (~IS_SUBMISSION, Run.state.in_(FINISHED_STATES), Run.rerun_of.is_(None))
FINISHED_SWEEP = _FINISHED_SWEEP  # the same run set for service.history's windows (any lane, any scope)


class NotFound(LookupError):
    """The requested run/architecture/submission/device does not exist (the API maps it to 404)."""


def run_scope_label(run: Run, size: int) -> str:
    """``compat.results.scope_label`` of a stored run: a submission run names its submission (id, Hub id@revision or
    upload, config digest); the one spelling the run list, the coverage read and the declared comparison show."""
    provenance = None
    if run.scope == Scope.SUBMISSION:
        provenance = provenance_of(run)
    return scope_label(run.catalog_source, run.snapshot_id, run.scope, size, provenance=provenance)


def finished_sweeps(device: str | None = None, *, trigger: str | None = None,
                    scope: str | None = str(Scope.FULL), lane: str = PINNED_LANE) -> Select[tuple[Run]]:
    """The runs every "latest" read chooses from, newest first: finished (complete or incomplete), not a
    submission, of ``lane`` (default the pinned one), of the device identity ``device`` (None: any), of
    ``trigger`` if given, of ``scope`` (default full; None: any)."""
    q = select(Run).where(*_FINISHED_SWEEP, Run.lane == lane)
    if device is not None:
        q = q.where(Run.identity == device)
    if trigger is not None:
        q = q.where(Run.trigger == str(trigger))
    if scope is not None:
        q = q.where(Run.scope == scope)
    return q.order_by(*_ORDER)


def latest_run(session: Session, device: str, *, trigger: str | None = None,
               scope: str | None = str(Scope.FULL)) -> Run | None:
    """The latest run of ``device`` (an identity, or a plain name: ``resolve_identity``): the newest of
    ``finished_sweeps`` (default full: the headline run)."""
    ident = resolve_identity(session, device)
    if ident is None:
        return None
    return session.scalars(finished_sweeps(ident, trigger=trigger, scope=scope).limit(1)).first()


def baseline_run(session: Session, run_id: str, *, trigger: str | None = None) -> Run | None:
    """What ``run_id`` is compared with: the newest finished run started before it of the same lane and device identity
    (name, profile, strict: a trn3 run never against a trn2 one, a strict run never against a fallback one), of
    ``trigger`` (None: any but submission), with a catalog ranked alike (Hub vs registry); a full run's baseline is
    full, a selection run's may be either (it is compared over its selection). None for the first one."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    sources = [src for src, in session.execute(select(Run.catalog_source).distinct())
               if is_ranked(src) == is_ranked(run.catalog_source)]
    q = (select(Run).where(*_FINISHED_SWEEP, Run.identity == run.identity, Run.id != run.id, Run.lane == run.lane,
                           Run.catalog_source.in_(sources),
                           (Run.started < run.started) | ((Run.started == run.started) & (Run.id < run.id))))
    if trigger is not None:
        q = q.where(Run.trigger == str(trigger))
    if run.scope != Scope.SELECTION:
        q = q.where(Run.scope == str(Scope.FULL))
    return session.scalars(q.order_by(*_ORDER).limit(1)).first()


def selection_of(session: Session, run_id: str) -> list[str] | None:
    """The architectures a selection run planned; None for a full run (or an unknown one)."""
    run = session.get(Run, run_id)
    if run is None or run.scope != Scope.SELECTION:
        return None
    return list(session.scalars(select(RunArchitecture.architecture).where(RunArchitecture.run_id == run_id)))


def missing_count(session: Session, run_id: str) -> int:
    """Planned results of a run that have no stored result."""
    return session.scalar(
        select(func.count()).select_from(PlannedResult).outerjoin(
            Result,
            (Result.run_id == PlannedResult.run_id) & (Result.architecture == PlannedResult.architecture)
            & (Result.device == PlannedResult.device) & (Result.check == PlannedResult.check),
        ).where(PlannedResult.run_id == run_id, Result.id.is_(None))
    ) or 0


# What the rules read of a record (statuses, ops, reasons): ``run_records`` loads only these, so a diff or a
# re-judge over thousands of records skips logs, metrics and errors. Checked against ResultRecord at import.
RULE_FIELDS = checked_fields(("architecture", "rank", "device", "check", "status", "blocking_op", "reason",
                              "fallback_ops"))


# What a diff reads: the rules' fields and the error (the new failures' signatures group by its first line).
DIFF_FIELDS = checked_fields((*RULE_FIELDS, "error"))


def run_records(session: Session, run_id: str, fields: tuple[str, ...] = RULE_FIELDS) -> list[ResultRecord]:
    """A run's records with ``fields`` read (default ``RULE_FIELDS``; the others at their defaults: no logs,
    metrics or errors)."""
    rows = session.execute(select(*select_columns(fields)).where(Result.run_id == run_id)).all()
    # model_construct: the stored values were validated on the way in; re-validating thousands costs.
    return [ResultRecord.model_construct(**from_columns(fields, row)) for row in rows]


def check_device(session: Session, device: str) -> str:
    """The stored identity ``device`` names (``resolve_identity``); NotFound naming the known ones when it names
    none (never a silent empty answer)."""
    ident = resolve_identity(session, device)
    if ident is None:
        names = device_names(session)
        raise NotFound(f"device {device!r} has no runs; known devices: {', '.join(names) or 'none yet'}")
    return ident


def resolve_identity(session: Session, device: str) -> str | None:
    """``compat.identity.resolve`` over the stored identities: ``neuron (trn3)`` itself, ``neuron`` its default
    profile's identity (``neuron (trn2)``) or its only one."""
    return identity.resolve(device, device_names(session))


def device_names(session: Session) -> list[str]:
    """Every stored device identity (``neuron (trn2)``, ``neuron (trn3, strict)``, ``cpu``), sorted."""
    return sorted(session.scalars(select(Run.identity).distinct().where(Run.identity != "")))


def device_row(session: Session, ident: str) -> Device | None:
    """The device table's row of an identity's device (its description and versions, as last seen)."""
    parsed = identity.parse(ident)
    return session.get(Device, parsed.name) if parsed is not None else None


def rerun_of(session: Session, run_id: str) -> str | None:
    """The flake guard's re-run of ``run_id`` (the newest, should there be several); None when none was made."""
    return session.scalar(select(Run.id).where(Run.rerun_of == run_id).order_by(*_ORDER).limit(1))


def get_run_row(session: Session, run_id: str) -> Run:
    reap(session, run_id=run_id)
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound(f"run {run_id!r} not found")
    return run


def latest_runs_of(session: Session, architecture: str, device: str | None = None) -> dict[str, str]:
    """device identity -> the newest finished run that has results of ``architecture`` (any scope: a run of just
    this architecture is its latest word; submission runs and per-model runs (``compat sweep --models``), which
    measure one model's own config, are not: the class verdict stays the class sweep's)."""
    q = (select(Run.identity, Result.run_id).join(Run, Run.id == Result.run_id)
         .where(Result.architecture == architecture, Run.catalog_source != CORPUS_SOURCE, *_FINISHED_SWEEP))
    if device is not None:
        q = q.where(Run.identity == (resolve_identity(session, device) or device))
    newest: dict[str, str] = {}
    for dev, rid in session.execute(q.order_by(*_ORDER)):
        newest.setdefault(dev, rid)
    return newest


def latest_results_in(session: Session, architecture: str, device: str | None = None) -> list[ResultRecord]:
    """Results of ``architecture`` per device identity from its latest run there (``latest_runs_of``); each
    record's ``device`` is that identity (``neuron (trn2)``), so two profiles of one device are told apart."""
    out: list[ResultRecord] = []
    for ident, rid in sorted(latest_runs_of(session, architecture, device).items()):
        rows = session.scalars(select(Result).where(
            Result.run_id == rid, Result.architecture == architecture).order_by(Result.id))
        out.extend(row_to_record(r).model_copy(update={"device": ident}) for r in rows)
    return out
