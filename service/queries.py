"""Read functions shared by the REST routers, the dashboard pages and the CLI: session in, pydantic schemas out.

The read rules (docs/ARCHITECTURE.md, "Read rules") are applied here and nowhere else: which run (latest, headline,
baseline) is ``service.runs``; one run's headline (with its range across decisions) is ``service.headline``;
supported, what blocks an architecture, ops on the CPU and regressions are the pure rules of ``compat.results``,
``compat.blocking``, ``compat.decisions`` and ``compat.diff``; blockers, chains and unlocks (``compat.chains``) are
read by ``service.blockers``. Reads first mark runs whose owner is lost ``interrupted``
(``service.lifecycle.reap``), so no page shows a dead run as in progress.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from compat import status_filter
from compat.blocking import blocking_record
from compat.results import (
    PINNED_LANE,
    SUPPORT_CHECKS,
    ResultRecord,
    RunKind,
    arch_verdict,
    is_ranked,
    is_supported_statuses,
    run_kind,
)
from compat.states import FINISHED_STATES, RunState, SubmissionState
from compat.verdict_text import verdict_text
from service import history
from service import schemas as S
from service import schemas_blockers as SB
from service import submissions as submission_rules
from service.blockers import blockers_out
from service.declared_support import declared_lists
from service.diffs import diff_runs, run_diff  # noqa: F401 - the diff reads, served from here like every read
from service.headline import device_coverage, frac
from service.lifecycle import reap
from service.models import Architecture, CatalogModel, Result, Run, Submission
from service.records import aware, row_to_record
from service.rollup import ArchOutcome, CatalogRow, run_counts, run_view
from service.runs import (
    IS_SUBMISSION,
    NotFound,
    baseline_run,
    check_device,
    device_names,
    device_row,
    finished_sweeps,
    get_run_row,
    latest_results_in,
    latest_run,
    latest_runs_of,
    rerun_of,
    run_scope_label,
)

# The API's spelling of ``compat.status_filter``'s vocabulary (the matrix page accepts the same words).
StatusFilter = StrEnum("StatusFilter", {w.upper(): w for w in (*status_filter.WORDS, *status_filter.ALIASES)})
_ORDER = (Run.started.desc(), Run.id.desc())


def _runs_for(session: Session, device: str | None, run_id: str | None) -> list[Run]:
    """One run (``run_id``), or the headline run of ``device`` (NotFound when it has none), or of every device."""
    if run_id is not None:
        run = get_run_row(session, run_id)
        if device is not None and device not in (run.identity, run.device):
            raise NotFound(f"run {run_id!r} is on {run.identity or run.device!r}, not {device!r}")
        return [run]
    if device is not None:
        run = latest_run(session, check_device(session, device))
        if run is None:
            raise NotFound(f"no finished full run on {device!r} yet")
        return [run]
    return [r for r in (latest_run(session, d) for d in device_names(session)) if r is not None]


def list_devices(session: Session) -> list[S.DeviceOut]:
    """Every measured device identity (``neuron (trn2)``, ``neuron (trn3, strict)``, ``cpu``) with its headline run
    (``last_run_id``: the latest full finished run)."""
    out = []
    for ident in device_names(session):
        run = latest_run(session, ident)
        newest = session.scalars(select(Run).where(Run.identity == ident).order_by(*_ORDER).limit(1)).first()
        d = device_row(session, newest.device) if newest is not None else None
        out.append(S.DeviceOut(name=ident, simulated=d.simulated if d else False,
                               description=d.description if d else "", torch_version=d.torch_version if d else "",
                               backend_version=d.backend_version if d else "", last_run_id=run.id if run else None,
                               device=newest.device if newest else ident,
                               profile=newest.profile if newest else None,
                               strict=bool(newest.strict) if newest else False))
    return out


def coverage(session: Session, device: str | None = None, run_id: str | None = None,
             top_n: int | None = None) -> S.Coverage:
    """Supported / total per device (latest run, or the given run), per check, optionally over the top-N."""
    return S.Coverage(items=[device_coverage(session, r, top_n) for r in _runs_for(session, device, run_id)])


def coverage_history(session: Session, device: str) -> S.CoverageHistory:
    """Supported/total of every finished full run of ``device`` (selections and unfinished runs would draw drops
    that are not there)."""
    device = check_device(session, device)
    runs = session.scalars(finished_sweeps(device).order_by(None).order_by(Run.started, Run.id)).all()
    points = []
    for run in runs:
        if run.supported_count is None:  # still running: count live
            total, supported, _ = run_counts(session, run)
        else:
            total, supported = run.arch_count or 0, run.supported_count
        points.append(S.CoveragePoint(run_id=run.id, started=aware(run.started), trigger=run.trigger,
                                      state=run.state, supported=supported, total=total,
                                      fraction=frac(supported, total)))
    return S.CoverageHistory(device=device, points=points)


def _row(c: CatalogRow, run: Run, o: ArchOutcome | None) -> S.ArchitectureRow:
    o = o or ArchOutcome()
    return S.ArchitectureRow(
        name=c.architecture, rank=c.rank, model_type=c.model_type, downloads=c.downloads,
        representative=c.representative, remote_code=c.remote_code, device=run.identity or run.device, run_id=run.id, supported=o.supported, fallback=o.fallback, statuses=o.statuses,
        fallback_ops=o.fallback_ops,
        blocking_op=o.blocking_op, error=o.error,
    )


def _matches(o: ArchOutcome | None, status: str | None, check: str | None) -> bool:
    statuses = o.statuses if o else {}
    if status is None:
        return check is None or check in statuses
    return status_filter.matches(statuses, status, None if check is None else [check])


def list_architectures(session: Session, *, status: str | None = None, check: str | None = None,
                       device: str | None = None, q: str | None = None, page: int = 1,
                       per_page: int = 50) -> S.ArchitecturePage:
    """Architectures in each device's headline run, by rank, filtered by a ``compat.status_filter`` word."""
    status = str(status) if status is not None else None
    check = str(check) if check is not None else None
    needle = q.lower() if q else None
    hits: list[tuple[CatalogRow, Run, ArchOutcome | None]] = []
    for run in _runs_for(session, device, None):
        view = run_view(session, run)
        for c in view.catalog:
            if needle and needle not in c.architecture.lower() and needle not in c.model_type.lower():
                continue
            o = view.outcomes.get(c.architecture)
            if _matches(o, status, check):
                hits.append((c, run, o))
    hits.sort(key=lambda h: (h[0].rank, h[0].architecture, h[1].device))
    start = (page - 1) * per_page
    # Build response rows only for the page shown.
    return S.ArchitecturePage(items=[_row(*h) for h in hits[start:start + per_page]], total=len(hits),
                              page=page, per_page=per_page)


def verdict_of(records: list[ResultRecord]) -> S.SubmissionVerdict | None:
    """One device's verdict over its records, by the architecture verdict's rule (compat.results.arch_verdict and
    compat.verdict_text, the first blocker by compat.blocking): what a submission shows, the same words as its
    architecture's page; None without records."""
    if not records:
        return None
    blocker = blocking_record(records)
    ops = [op for r in records if r.check in SUPPORT_CHECKS for op in r.fallback_ops]
    return S.SubmissionVerdict(device=records[0].device, word=arch_verdict(records), text=verdict_text(records),
                               fallback_ops=list(dict.fromkeys(ops)),
                               blocking_op=blocker.blocking_op if blocker else None)


def architecture_detail(session: Session, name: str) -> S.ArchitectureDetail:
    arch = session.get(Architecture, name)
    has_results = session.scalar(select(Result.id).where(Result.architecture == name).limit(1))
    if arch is None and has_results is None:
        raise NotFound(f"architecture {name!r} not found")
    latest = latest_results_in(session, name)
    supported: dict[str, bool] = {}
    verdicts: dict[str, str] = {}
    for dev in sorted({r.device for r in latest}):
        supported[dev] = is_supported_statuses({str(r.check): str(r.status) for r in latest if r.device == dev})
        verdicts[dev] = verdict_of([r for r in latest if r.device == dev]).text  # type: ignore[union-attr]
    rows = session.execute(
        select(Result.run_id, Run.identity, Result.check, Result.status, Run.started, Run.trigger,
               Run.submission_id, Run.submitted_model_id, Run.submitted_revision, Run.config_digest)
        .join(Run, Run.id == Result.run_id).where(Result.architecture == name)
        .order_by(Run.started.desc(), Run.id.desc(), Result.id)
    )
    history: dict[tuple[str, str], S.HistoryPoint] = {}
    for run_id, dev, check, status, started, trigger, sub_id, sub_model, sub_rev, digest in rows:
        kind = run_kind(trigger)
        sub = dict(submission_id=sub_id, submitted_model_id=sub_model, submitted_revision=sub_rev,
                   config_digest=digest) if kind == RunKind.SUBMISSION else {}
        hp = history.setdefault((run_id, dev), S.HistoryPoint(
            run_id=run_id, started=aware(started), trigger=trigger, kind=kind, device=dev, supported=False,
            statuses={}, **sub))
        hp.statuses[check] = status
    for hp in history.values():
        hp.supported = is_supported_statuses(hp.statuses)
    # What blocks it: the one rule (compat.blocking); a reference_fail or harness_error is its own status only.
    failing = blocking_record(latest)
    return S.ArchitectureDetail(
        name=name, model_type=arch.model_type if arch else "", rank=arch.rank if arch else None,
        downloads=arch.downloads if arch else 0, representative=arch.representative if arch else None,
        remote_code=arch.remote_code if arch else False, latest=latest, supported=supported, verdicts=verdicts,
        latest_runs=latest_runs_of(session, name),
        history=[h for h in history.values() if h.kind == RunKind.SWEEP],
        submitted=[h for h in history.values() if h.kind == RunKind.SUBMISSION],
        blocking_op=failing.blocking_op if failing else None,
        error=f"{failing.error.type}: {failing.error.message}" if failing and failing.error else None,
        repro=(failing.repro if failing else None) or next((r.repro for r in latest if r.repro), None),
        badge_url=f"/api/v1/badges/{name}.svg",
    )


def _summary(session: Session, run: Run) -> dict:
    if run.supported_count is None or run.state not in FINISHED_STATES:
        total, supported, results = run_counts(session, run)
    else:
        total, supported, results = run.arch_count or 0, run.supported_count, run.result_count or 0
    planned = run.planned_count or 0
    return dict(id=run.id, trigger=run.trigger, kind=run_kind(run.trigger), submission_id=run.submission_id,
                device=run.identity or run.device, state=run.state, started=aware(run.started),
                finished=aware(run.finished), catalog_source=run.catalog_source, snapshot_id=run.snapshot_id,
                scope=run.scope, scope_label=run_scope_label(run, total),
                versions=run.versions or {}, checks=run.checks or [], planned=planned,
                results=results, missing=max(0, planned - results), total=total, supported=supported,
                end_reason=run.end_reason, device_name=run.device, profile=run.profile, strict=bool(run.strict),
                determinants=run.determinants or {}, rerun_of=run.rerun_of, rerun=rerun_of(session, run.id),
                lane=run.lane or PINNED_LANE)


def list_runs(session: Session, *, device: str | None = None, trigger: str | None = None,
              state: str | None = None, kind: str | None = None, page: int = 1, per_page: int = 50) -> S.RunPage:
    """Runs newest first, of ``kind`` (sweep / submission; None: both), with how many runs of each kind match the
    other filters (so a list of sweeps says how many submissions it leaves out)."""
    reap(session)
    cond = []
    if device is not None:
        cond.append(Run.identity == check_device(session, device))
    if trigger is not None:
        cond.append(Run.trigger == str(trigger))
    if state is not None:
        cond.append(Run.state == str(state))
    n_sub, n_all = session.execute(select(func.sum(case((IS_SUBMISSION, 1), else_=0)), func.count())
                                   .select_from(Run).where(*cond)).one()
    kinds = {str(RunKind.SWEEP): (n_all or 0) - (n_sub or 0), str(RunKind.SUBMISSION): n_sub or 0}
    if kind is not None:
        cond.append(IS_SUBMISSION if kind == RunKind.SUBMISSION else ~IS_SUBMISSION)
    total = kinds[str(kind)] if kind is not None else n_all or 0
    runs = session.scalars(select(Run).where(*cond).order_by(Run.started.desc(), Run.id.desc())
                           .offset((page - 1) * per_page).limit(per_page))
    return S.RunPage(items=[S.RunSummary(**_summary(session, r)) for r in runs], total=total,
                     page=page, per_page=per_page, kind=None if kind is None else str(kind), kinds=kinds)


def previous_run_id(session: Session, run_id: str) -> str | None:
    """The baseline of ``run_id`` with its own trigger (what "last night" means); None for an unknown run or the
    first one."""
    run = session.get(Run, run_id)
    base = baseline_run(session, run_id, trigger=run.trigger) if run is not None else None
    return base.id if base is not None else None


def result_logs(session: Session, run_id: str, architecture: str) -> list[S.LogEntry]:
    """The captured output of every check of ``architecture`` in ``run_id``, in the order it was stored (checks
    without output left out)."""
    rows = session.execute(
        select(Result.device, Result.check, Result.status, Result.log)
        .where(Result.run_id == run_id, Result.architecture == architecture).order_by(Result.id))
    return [S.LogEntry(device=d, check=c, status=s, log=log) for d, c, s, log in rows if log]


def store_fingerprint(session: Session) -> tuple:
    """What changes whenever a number read here can change: results added or replaced (newest result id), runs
    started or finished, and the sum of the runs' ``data_version`` (bumped by every write through the store)."""
    newest_result = session.scalar(select(func.max(Result.id)))
    runs = session.execute(select(
        func.count(Run.id), func.max(Run.started), func.max(Run.finished),
        func.sum(case((Run.state == RunState.RUNNING.value, 1), else_=0)), func.sum(Run.data_version),
    )).one()
    models = session.scalar(select(func.max(CatalogModel.updated)))  # per-model rows (compat sweep --models)
    return (newest_result, *runs, models)


def get_run(session: Session, run_id: str, *, with_results: bool = True) -> S.RunDetail:
    run = get_run_row(session, run_id)
    counts = dict(session.execute(select(Result.status, func.count()).where(Result.run_id == run_id)
                                  .group_by(Result.status)).all())
    results = []
    if with_results:
        rows = session.scalars(select(Result).where(Result.run_id == run_id)
                               .order_by(Result.rank.nulls_last(), Result.architecture, Result.id))
        results = [row_to_record(r).model_copy(update={"log": None}) for r in rows]  # logs: via the run's files
    new = history.new_in_release_of(session, run_id)
    return S.RunDetail(**_summary(session, run), device_info=run.device_info or {}, status_counts=counts,
                       result_list=results, notifications=run.notifications,
                       new_in_release=new.text() if new else None, new_architectures=new.architectures if new else [])


def blockers(session: Session, device: str | None = None, run_id: str | None = None) -> SB.Blockers:
    """``compat.chains.blocker_report`` over the headline run of each device (or of ``device``, or one run), with
    each run's measured chains; ``compat.coverage.fallback_ranking`` merged by op. Architectures by rank."""
    return blockers_out(session, _runs_for(session, device, run_id), device, run_id)


def declared_coverage(session: Session, top_n: int | None = None) -> S.DeclaredCoverage:
    """Declared lists and measured devices over one denominator: the catalog of the newest full finished run (its
    top N when that catalog is ranked; all of it, unranked, when it is Transformers' registry)."""
    ref = session.scalars(finished_sweeps().limit(1)).first()
    if ref is None:
        return S.DeclaredCoverage(top_n=None, total=0, rows=[])
    ranked = is_ranked(ref.catalog_source)
    top_n = top_n if ranked else None
    catalog = run_view(session, ref).catalog
    names = [c.architecture for c in (catalog[:top_n] if top_n is not None else catalog)]
    total = len(names)
    rows = []
    for dl in declared_lists():
        sup = [n for n in names if n in dl.architectures]
        rows.append(S.DeclaredCoverageRow(kind="declared", name=dl.title, label=S.DECLARED_LABEL,
                                          source=dl.source_url, supported=len(sup), total=total,
                                          fraction=frac(len(sup), total), architectures=sup))
    for dev in device_names(session):
        run = latest_run(session, dev)
        if run is None:
            continue
        outcomes = run_view(session, run).outcomes
        sup = [n for n in names if n in outcomes and outcomes[n].supported]
        rows.append(S.DeclaredCoverageRow(kind="measured", name=dev, label=f"measured on {dev}, run {run.id}",
                                          run_id=run.id, supported=len(sup), total=total,
                                          fraction=frac(len(sup), total), architectures=sup))
    return S.DeclaredCoverage(top_n=top_n, total=total, rows=rows, run_id=ref.id, ranked=ranked,
                              scope_label=run_scope_label(ref, len(catalog)))


def get_submission(session: Session, submission_id: int) -> S.SubmissionOut:
    sub = session.get(Submission, submission_id)
    if sub is None:
        raise NotFound(f"submission {submission_id} not found")
    results = []
    if sub.run_id:
        rows = session.scalars(select(Result).where(Result.run_id == sub.run_id).order_by(Result.id))
        results = [row_to_record(r) for r in rows]
    position = None
    if sub.state == SubmissionState.QUEUED:  # one FIFO queue (in-process or the broker's): queued rows ahead of this one, plus it
        position = 1 + (session.scalar(select(func.count()).select_from(Submission).where(
            Submission.state == SubmissionState.QUEUED.value, Submission.id < sub.id)) or 0)
    model_type = sub.config.get("model_type") if isinstance(sub.config, dict) else None
    return S.SubmissionOut(id=sub.id, state=sub.state, model_id=sub.model_id, revision=sub.revision,
                           architecture=sub.architecture, run_id=sub.run_id, error=sub.error,
                           created=aware(sub.created), updated=aware(sub.updated),
                           url=f"/api/v1/submissions/{sub.id}", results=results,
                           model_type=model_type if isinstance(model_type, str) else None,
                           config_digest=sub.config_digest, notes=list(sub.notes or []), queue_position=position,
                           uploaded=submission_rules.uploaded(sub), verdict=verdict_of(results))
