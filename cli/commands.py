"""What the harness commands do once their input is parsed: ``compat sweep | whatif | catalog | cache``.
``app.py`` holds their options and help, and imports this module (torch, the store) only to run one; the reads
(``show``, ``blockers``) are ``reads.py``, without torch; ``repro`` is ``repro.py``, run through here. Every number
printed from the store is read through ``service.queries`` (the API's and the pages' reads).
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from cli import models as model_commands  # noqa: F401  (`compat sweep --models`, run through this module)
from cli import publish as publish_commands  # noqa: F401  (`compat publish`, run through this module)
from cli import repro as repro_commands  # noqa: F401  (`compat repro`, run through this module)
from cli.console import console, fail
from cli.progress import arch_note, fetch_progress, reporter
from cli.tables import coverage_table
from cli.validate import architecture_error, memory_limit
from cli.whatif import run as run_whatif
from compat.chains import chains_of, rank
from compat.checks import RUN_ORDER
from compat.coverage import coverage, native_per_check
from compat.decisions import DecisionEffect, headline_range
from compat.diff import RunDiff
from compat.identity import identity_of
from compat.results import (
    PINNED_LANE,
    ArchitectureEntry,
    Check,
    Report,
    ResultRecord,
    Scope,
    Trigger,
    percent,
    scope_label,
)
from compat.settings import get_settings
from compat.states import RunState
from compat.wording import plural
from service.store import RunStateError, Store
from worker.catalog.catalog import Catalog, CatalogError
from worker.catalog.load import load_catalog, refresh_snapshot
from worker.orchestration import chains, decisions, notify
from worker.orchestration.celery_app import make_app
from worker.orchestration.executors import CeleryExecutor, ProgressFn, RunOutcome
from worker.orchestration.flake_guard import rerun_regressions, rerun_work
from worker.orchestration.nightly import Rerun, regression_gate
from worker.orchestration.planning import make_plan
from worker.orchestration.sweep import run_sweep, write_report
from worker.orchestration.variants import VariantRunner
from worker.orchestration.warm_pool import sweep_pool
from worker.run.process.devices import Device, DeviceError, resolve_device
from worker.run.process.pool import Pool
from worker.run.reference.reference_cache import ReferenceCache, checkpoint_folder_cache, folder_cache


def _device(name: str) -> Device:
    """The device under test, resolved here, at the command's edge, once."""
    try:
        return resolve_device(name)
    except DeviceError as exc:
        raise fail(str(exc)) from None


def _store(enabled: bool) -> Store | None:
    return Store(get_settings().database_url) if enabled else None


def sweep(*, device: str, source: str, limit: int | None, arch: list[str] | None, checks: list[Check], jobs: int,
          json_path: Path | None, store: bool, trigger: str, broker: bool, baseline: str | None,
          fail_on_regression: bool, resume: str | None = None, measure_decisions: bool = True,
          switches: dict[str, str] | None = None, measure_chains: bool = True, pool: Pool | None = None) -> int:
    """``compat sweep``: run the sweep (here or on the cluster), or finish an interrupted one (``resume``), print
    the coverage table; the exit code of the gate when ``baseline`` is given, else 0. ``switches``: the device's
    decisions at other options, for this sweep only (in this process and the workers it starts). ``pool``: the
    sweep's workers, already started (``warm_pool.sweep_pool``; closed here)."""
    if resume is not None:
        return _resume(resume, jobs, json_path, baseline, fail_on_regression)
    if switches:
        with decisions.switched(_device(device), switches):
            # Resolved again inside: the run records the device as it is now, switches included.
            return _sweep(_device(device), source, limit, arch, checks, jobs, json_path, store, trigger, broker,
                          baseline, fail_on_regression, measure_decisions, measure_chains, pool)
    return _sweep(_device(device), source, limit, arch, checks, jobs, json_path, store, trigger, broker, baseline,
                  fail_on_regression, measure_decisions, measure_chains, pool)


def _sweep(dev: Device, source: str, limit: int | None, arch: list[str] | None, checks: list[Check], jobs: int,
           json_path: Path | None, store: bool, trigger: str, broker: bool, baseline: str | None,
           fail_on_regression: bool, measure_decisions: bool, measure_chains: bool = True,
           started: Pool | None = None) -> int:
    if not broker and jobs > 0:
        memory_limit()
    try:
        catalog = _load_catalog(source, None)
    except CatalogError as exc:
        raise fail(str(exc)) from None
    entries = catalog.entries
    if arch:
        known = {e.name: e for e in entries}
        bad = architecture_error(arch, list(known))
        if bad:
            raise fail(bad)
        entries = [known[a] for a in dict.fromkeys(arch)]
    entries = entries[: limit or None]
    # The whole catalog, or a selection of it (--arch, --limit): a selection is never the headline.
    scope = Scope.FULL if [e.name for e in entries] == catalog.names() else Scope.SELECTION
    # The store is opened before anything runs: a database nothing can open fails here, in one line (main()).
    sink = _store(store) if not broker else None
    with ExitStack() as stack:
        # The sweep's warm workers stay for the re-runs after it (decisions, chains): no second start.
        if started is not None:
            pool: Pool | None = stack.enter_context(started)
        elif not broker and jobs > 0 and (measure_decisions or measure_chains):
            pool = stack.enter_context(sweep_pool(dev.name, jobs))
        else:
            pool = None
        report = _sweep_phases(dev, entries, checks, jobs, json_path, trigger, broker, catalog, scope, sink,
                               measure_decisions, measure_chains, pool)
    rerun = (_broker_rerun(report, dev) if broker else _local_rerun(report, dev)) if baseline else None
    return _summary(report, dev, json_path, baseline, fail_on_regression, rerun, stored=store)


def _sweep_phases(dev: Device, entries: list[ArchitectureEntry], checks: list[Check], jobs: int,
                  json_path: Path | None, trigger: str, broker: bool, catalog: Catalog, scope: Scope,
                  sink: Store | None, measure_decisions: bool, measure_chains: bool, pool: Pool | None) -> Report:
    """The sweep, then (here, not on a cluster) its decisions and blocker chains, all on ``pool`` when given."""
    with reporter(console, len(entries), f"sweep {dev.name}") as bar:

        def progress(entry: ArchitectureEntry, recs: list[ResultRecord]) -> None:
            bar.advance(entry.name, arch_note(recs))

        if broker:
            report = _broker_sweep(entries, dev, checks, trigger, json_path, catalog, scope,
                                   lambda done, _total: bar.update(done, "stored"))
        else:
            report = run_sweep(entries, dev, checks, jobs=jobs, trigger=trigger, store=sink,
                               json_path=json_path, progress=progress, catalog_source=catalog.source,
                               snapshot_id=catalog.snapshot_id, scope=scope, pool=pool)
    if not broker and (measure_decisions or measure_chains):
        # One pool for both phases' re-runs (each task sets its own switches or CPU ops in its worker).
        with VariantRunner(dev, jobs, pool=pool) as runner:
            if measure_decisions:
                _measure_decisions(report, dev, jobs, sink, json_path, runner)
            if measure_chains:
                _measure_chains(report, dev, jobs, sink, json_path, runner)
    return report


def _local_rerun(report: Report, dev: Device) -> Rerun:
    """The flake guard on this machine: each regressed architecture again in a fresh worker process."""
    run = report.run

    def rerun(diff: RunDiff) -> str | None:
        console.print(f"flake guard: re-running {len(diff.regressions)} regressed check(s) of run {run.id}, each "
                      "architecture in a fresh process", highlight=False, soft_wrap=True)
        return rerun_regressions(Store(), diff, report.architectures, dev, trigger=run.trigger,
                                 catalog_source=run.catalog_source, snapshot_id=run.snapshot_id)
    return rerun


def _broker_rerun(report: Report, dev: Device) -> Rerun:
    """The flake guard on the cluster: the regressed architectures as a new run's tasks (new task deliveries, on
    whichever worker takes them), linked to the run they re-run."""
    run = report.run

    def rerun(diff: RunDiff) -> str | None:
        work = rerun_work(diff)
        entries = [e for e in report.architectures if e.name in work]
        if not entries:
            return None
        checks = [c for c in RUN_ORDER if any(c in cs for cs in work.values())]
        settings, store = get_settings(), Store()
        plan = make_plan(entries, dev, checks, trigger=run.trigger, database_url=store.database_url,
                         workdir=settings.var_dir / "work", seed=settings.seed, catalog_source=run.catalog_source,
                         snapshot_id=run.snapshot_id, scope=Scope.SELECTION, rerun_of=run.id)
        console.print(f"flake guard: re-running {len(diff.regressions)} regressed check(s) of run {run.id} on the "
                      "cluster", highlight=False, soft_wrap=True)
        return CeleryExecutor(make_app(settings)).run(store, plan).run_id
    return rerun


def _measure_decisions(report: Report, dev: Device, jobs: int, sink: Store | None, json_path: Path | None,
                       runner: VariantRunner) -> None:
    """How many architectures each of the device's decision switches moves, measured by re-running those a switch
    can change (compat/decision_work.py); where its time went is printed after it."""
    switches = decisions.device_switches(dev)
    if not switches:
        return
    work = decisions.prepare(report, dev)
    if work is None:
        console.print("decisions not measured: this run set switches away from the profile's defaults", highlight=False)
        return
    before = runner.clock_now()
    with reporter(console, len(work.reruns), "decisions") as bar:
        decisions.record(report, dev, jobs=jobs, store=sink, json_path=json_path, runner=runner,
                         progress=lambda label, done, _total: bar.update(done, label))
    looked = sum(len(w.looked) for w in work.plans)
    console.print(f"decisions: {len(work.plans)} settings over {looked} (setting, architecture) pairs, "
                  f"{len(work.reruns)} re-run(s); {runner.clock_now().since(before).text()}", highlight=False, soft_wrap=True)


def _measure_chains(report: Report, dev: Device, jobs: int, sink: Store | None, json_path: Path | None,
                    runner: VariantRunner) -> None:
    """Each architecture failing at an op, re-run with its blocking ops on the CPU fallback until it passes or
    fails otherwise (``compat blockers``' chains); a device that cannot move ops keeps only first blockers."""
    if not chains.can_move_ops(dev):
        return
    todo = len(chains_of(report.results, None)[0])
    if not todo:
        return
    before = runner.clock_now()
    with reporter(console, todo, "blocker chains") as bar:
        found = chains.record(report, dev, jobs=jobs, store=sink, json_path=json_path, runner=runner,
                              progress=lambda label, done, _total: bar.update(done, label))
    console.print(f"blocker chains: {runner.clock_now().since(before).text()}", highlight=False, soft_wrap=True)
    for u in rank(found).unlock_sets[:3]:
        console.print(u.message, highlight=False)


def _summary(report: Report, dev: Device, json_path: Path | None, baseline: str | None,
             fail_on_regression: bool, rerun: Rerun | None = None, *, stored: bool = True) -> int:
    """The sweep's coverage table (over the run's catalog: the API's and the pages' denominator), its scope and
    state, then the gate's verdict when ``baseline`` is given (``rerun``: the flake guard)."""
    run = report.run
    catalog = [e.name for e in report.architectures]
    scope = scope_label(run.catalog_source, run.snapshot_id, run.scope, len(catalog))
    mode = run.determinants.get("mode")
    ident = identity_of(dev.name, dev.info.details, None if mode is None else mode == "strict").label
    console.print(coverage_table(report.results, title=f"coverage on {ident} ({dev.info.description})",
                                 catalog=catalog, scope=scope))
    cov = coverage(report.results, catalog)
    n = cov.architectures
    console.print(f"run {run.id} on {ident}: {cov.supported} / {n} supported ({percent(cov.supported, n)}); "
                  f"{scope}", highlight=False, soft_wrap=True)
    profile = dev.info.details.get("profile")
    console.print(f"out of the box {cov.supported} / {n} ({percent(cov.supported, n)}), native {cov.native} / {n} "
                  f"({percent(cov.native, n)}), failing {cov.failing}" + (f"; profile {profile}" if profile else ""),
                  highlight=False, soft_wrap=True)
    console.print("native per check: " + ", ".join(f"{c} {k} / {n}" for c, k in native_per_check(report.results,
                                                                                             catalog).items()),
                  highlight=False, soft_wrap=True)
    effects = [DecisionEffect(**d) for d in report.decisions]
    console.print(f"headline: {headline_range(cov.supported, n, effects).text()}", highlight=False, soft_wrap=True)
    if stored:
        _new_in_release(run.id, run.lane)
    if cached := [r.metrics["reference_cache"] for r in report.results if "reference_cache" in r.metrics]:
        console.print(f"reference cache: {cached.count('hit')} hits, {cached.count('miss')} misses", highlight=False)
    if run.state not in (None, RunState.COMPLETE):
        console.print(f"run {run.id} is {run.state}: {run.missing} planned result(s) missing", highlight=False,
                      soft_wrap=True)
    if json_path:
        console.print(f"report: {json_path}")
    if baseline:
        return _regression_gate(run.id, dev.name, baseline, fail_on_regression, rerun)
    return 0


def _new_in_release(run_id: str, lane: str) -> None:
    """``new in transformers X: ...`` for a registry sweep: always on a newer library's lane, elsewhere only when
    the installed release brought architectures (``service.history.new_in_release_of``)."""
    new = Store().new_in_release(run_id)
    if new is not None and (new.architectures or lane != PINNED_LANE):
        console.print(new.text(), highlight=False, markup=False, soft_wrap=True)


def _resume(run_id: str, jobs: int, json_path: Path | None, baseline: str | None, fail_on_regression: bool) -> int:
    """``compat sweep --resume RUN``: take the interrupted run over and run only what it lacks, on its own device,
    catalog and checks; every stored result is kept, none is run or written again."""
    st = Store()
    try:
        info, planned, stored = st.resume_run(run_id)
    except (RunStateError, KeyError) as exc:
        raise fail(str(exc).strip("'\""), 1) from None
    dev = _device(info.device.name)
    try:
        catalog = _load_catalog(info.catalog_source, None)
    except CatalogError as exc:
        raise fail(str(exc), 1) from None
    if catalog.snapshot_id != info.snapshot_id:
        raise fail(f"run {run_id} was planned over catalog snapshot {info.snapshot_id}, the {info.catalog_source} "
                   f"catalog is now {catalog.snapshot_id}: cannot resume it faithfully", 1)
    names = list(dict.fromkeys(a for a, _d, _c in planned))
    lost = [n for n in names if catalog.get(n) is None]
    if lost:
        raise fail(f"run {run_id}: {len(lost)} planned architecture(s) are not in the catalog any more "
                   f"({', '.join(lost[:3])}...)", 1)
    entries = [catalog.get(n) for n in names]
    todo = sum(1 for e in entries if any((e.name, dev.name, str(c)) not in stored for c in info.checks))
    console.print(f"resuming run {run_id}: {len(stored)} of {len(planned)} results stored, {todo} "
                  f"architecture(s) to run", highlight=False)
    with reporter(console, todo, f"resume {dev.name}") as bar:
        report = run_sweep(entries, dev, info.checks, jobs=jobs, store=st, json_path=None,
                           progress=lambda e, recs: bar.advance(e.name, arch_note(recs)), resume=(info, stored))
    report.results = st.run_results(run_id)  # the whole run, not only what this process added
    if json_path:
        write_report(report, json_path)
    return _summary(report, dev, json_path, baseline, fail_on_regression,
                    _local_rerun(report, dev) if baseline else None)


def _load_catalog(source: str, limit: int | None) -> Catalog:
    """The sweep's catalog; a live Hub listing shows its progress (it reads one config.json per model)."""
    with fetch_progress(console, get_settings().hub_limit) as on_fetch:
        return load_catalog(source, limit, progress=on_fetch)


def broker_sweep(entries: list[ArchitectureEntry], device: Device, checks: list[Check], *, trigger: Trigger,
                 store: Store, catalog_source: str, snapshot_id: str | None, scope: Scope = Scope.FULL,
                 on_progress: ProgressFn | None = None) -> tuple[RunOutcome, Report]:
    """``compat sweep --broker``: submit to the cluster at COMPAT_BROKER_URL, follow it, and return the outcome
    with the same JSON report an in-process sweep writes (with the run's state and missing count)."""
    settings = get_settings()
    plan = make_plan(entries, device, checks, trigger=trigger, database_url=store.database_url,
                     workdir=settings.var_dir / "work", seed=settings.seed, catalog_source=catalog_source,
                     snapshot_id=snapshot_id, scope=scope)
    outcome = CeleryExecutor(make_app(settings)).run(store, plan, on_progress)
    state, _planned, missing = store.run_state(outcome.run_id)
    run = plan.run.model_copy(update={"finished": datetime.now(UTC), "state": state, "missing": missing})
    report = Report(run=run, architectures=entries, results=outcome.results, op_traces=store.op_traces(outcome.run_id))
    return outcome, report


def _broker_sweep(entries: list[ArchitectureEntry], device: Device, checks: list[Check], trigger: str,
                  json_path: Path | None, catalog: Catalog, scope: Scope, on_progress: ProgressFn) -> Report:
    outcome, report = broker_sweep(entries, device, checks, trigger=Trigger(trigger), store=Store(),
                                   catalog_source=catalog.source, snapshot_id=catalog.snapshot_id, scope=scope,
                                   on_progress=on_progress)
    if outcome.state != RunState.COMPLETE:
        console.print(f"some architectures of run {outcome.run_id} never reported back")
    if json_path:
        write_report(report, json_path)
    return report


def _regression_gate(run_id: str, device: str, baseline: str, fail_on_regression: bool,
                     rerun: Rerun | None = None) -> int:
    store = Store()
    verdict = regression_gate(store, run_id, device, baseline, fail_on_regression, rerun)
    for line in verdict.lines:  # never wrapped: one regression per line, for a CI log's grep
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if verdict.diff is not None and (sent := notify.deliver(store, verdict.diff)) is not None:
        console.print(f"notifications: {notify.summary(sent)}", highlight=False, markup=False, soft_wrap=True)
    return verdict.code


def catalog_refresh(*, limit: int | None, out: Path | None, endpoint: str | None) -> None:
    """``compat catalog refresh``: list the Hub's text-generation models and save the ranked snapshot."""
    listed = limit or get_settings().hub_limit
    console.print(f"listing the Hub's {listed} most downloaded text-generation models", highlight=False)
    try:
        with fetch_progress(console, listed) as on_fetch:
            cat = refresh_snapshot(limit, out, endpoint=endpoint, progress=on_fetch)
    except CatalogError as exc:
        raise fail(str(exc), 1) from None
    console.print(f"snapshot {cat.snapshot_id}: {plural(len(cat.entries), 'architecture')}")


def whatif(*, chosen: dict[str, str], device: str, run_id: str | None, json_path: Path | None) -> int:
    """``compat whatif``: the run re-judged under other decision options (cli/whatif.py)."""
    return run_whatif(chosen=chosen, device=device, run_id=run_id, json_path=json_path)


def cache_info() -> None:
    """``compat cache info``: the CPU reference cache's folder, entries and size (worker/run/reference/reference_cache.py),
    and those of the tiny checkpoints kept beside it (worker/run/runner/checkpoints.py)."""
    state = "on" if get_settings().reference_cache else "off (COMPAT_REFERENCE_CACHE=0)"
    for what, cache in _caches():
        info = cache.info()
        console.print(f"{what} {state}: {info.entries} entries, {info.size_bytes / 2**20:.1f} MiB of "
                      f"{info.max_bytes / 2**20:.0f} MiB, in {info.folder}", highlight=False, soft_wrap=True)


def cache_clear() -> None:
    """``compat cache clear``: delete every entry of the CPU reference cache and of the tiny checkpoints'."""
    for what, cache in _caches():
        console.print(f"{what}: {cache.clear()} entries deleted from {cache.folder}", highlight=False, soft_wrap=True)


def _caches() -> list[tuple[str, ReferenceCache]]:
    """What ``compat cache`` shows and clears: the CPU references, and the tiny checkpoints kept beside them."""
    return [("reference cache", folder_cache()), ("tiny checkpoints", checkpoint_folder_cache())]
