"""``run_sweep``: fan a catalog out over the worker pool, collect records as they stream in, persist each one once.

A record is written to the store the moment its check is judged, with its own part of the captured log, so a crash
of the sweep itself loses nothing already judged; the JSON report is rewritten as architectures end (at most every
``JSON_EVERY_S``) and once the run ends.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import transformers

from compat.checks import RUN_ORDER
from compat.lifecycle import HEARTBEAT_S
from compat.results import (
    ArchitectureEntry,
    Check,
    OpTrace,
    Provenance,
    Report,
    ResultRecord,
    RunInfo,
    Scope,
    Status,
    Trigger,
    failure_records,
)
from compat.settings import get_settings
from compat.states import RunState
from worker.orchestration.executors import (
    DEFAULT_RUNNER,
    IN_PROCESS_RUNNER,
    ProgressFn,
    RunOutcome,
    SweepPlan,
    finalize,
    resolve_runner,
)
from worker.orchestration.warm_pool import sweep_pool
from worker.run.process.capture import attach_log
from worker.run.process.determinants import run_determinants
from worker.run.process.devices import Device, device_versions
from worker.run.process.pool import Outcome, Pool, Task, check_memory_limit
from worker.run.runner.reproducers import ReproFn, repro_command, submission_repro

# Pool outcome kind -> the status of the check that was running when the worker was stopped.
ABORT_STATUS = {"crash": Status.CRASH, "timeout": Status.TIMEOUT, "memory": Status.OOM, "error": Status.ERROR}
REFERENCE_PHASES = frozenset({"build", "reference", None})
# The JSON report is a view of the run (the store holds each record as it is judged): rewritten after each
# architecture, it was quadratic in the run (the whole registry's 2.3 MB report written 181 times, ~2 s of the CLI's
# CPU on a 2-core box beside its two workers). A reader now sees it at most this far behind while the run goes on.
JSON_EVERY_S = 2.0


class ResultSink(Protocol):
    def start_run(self, run: RunInfo, architectures: list[ArchitectureEntry],
                  planned: list[tuple[str, str, str]]) -> str: ...
    def add_results(self, run_id: str, records: list[ResultRecord]) -> None: ...
    def add_op_traces(self, run_id: str, traces: list[OpTrace]) -> None: ...
    def finish_run(self, run_id: str) -> str: ...
    def heartbeat(self, run_id: str) -> None: ...
    def run_state(self, run_id: str) -> tuple[str, int, int]: ...


Progress = Callable[[ArchitectureEntry, list[ResultRecord]], None]


def abort_records(entry: ArchitectureEntry, device: str, checks: list[Check], have: set[Check],
                  phase: str | None, outcome: Outcome, repro: ReproFn = repro_command) -> list[ResultRecord]:
    """Records for the checks a stopped worker never reported (pure).

    The check that was running gets crash/timeout/oom; later ones are skipped. A worker stopped before any check
    ran is never the device's problem: while running the CPU reference it is ``reference_fail`` (the reference
    genuinely failed), before that (start-up, building the tiny model) ``harness_error``.
    The worker's output that no record carried yet (its last words) goes with them.
    """
    missing = [c for c in checks if c not in have]
    why = outcome.error.splitlines()[-1] if outcome.error else outcome.kind
    running = phase if phase not in REFERENCE_PHASES else None
    if running is None:
        status = Status.REFERENCE_FAIL if phase == "reference" else Status.HARNESS_ERROR
        out = failure_records(entry, device, missing, status,
                              f"worker {outcome.kind} during {phase or 'start'}: {why}", peak_mem_mb=outcome.peak_rss_mb)
    else:
        out = []
        for c in missing:
            if str(c) == running:
                out += failure_records(entry, device, [c], ABORT_STATUS.get(outcome.kind, Status.CRASH),
                                       f"worker {outcome.kind}: {why}", duration_s=outcome.duration_s,
                                       peak_mem_mb=outcome.peak_rss_mb, repro=repro(entry.name, device, c),
                                       metrics={"exitcode": outcome.exitcode} if outcome.exitcode is not None else {})
            else:
                out += failure_records(entry, device, [c], Status.SKIPPED, f"worker {outcome.kind} during {running}",
                                       peak_mem_mb=outcome.peak_rss_mb)
    attach_log(out, outcome.log)
    return out


def write_report(report: Report, path: Path) -> None:
    """Atomic rewrite: a reader (or a crash mid-write) never sees a half-written report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report.model_dump(mode="json"), indent=1))
    os.replace(tmp, path)


class _Collector:
    """Holds the run's records, dedupes by key, and pushes to the store / JSON at the right moments. Keys in
    ``stored`` (a resumed run's results) are never written again."""

    def __init__(self, report: Report, store: ResultSink | None, run_id: str | None, json_path: Path | None,
                 stored: set[tuple[str, str, str]] | None = None):
        self.report, self.store, self.run_id, self.json_path = report, store, run_id, json_path
        self.by_arch: dict[str, dict[Check, ResultRecord]] = {}
        self.stored = stored or set()
        self._written = time.monotonic()

    def add(self, rec: ResultRecord) -> None:
        """A judged record, complete with its log: stored now, and only now (the one write of its row)."""
        if rec.key in self.stored:
            return
        self.by_arch.setdefault(rec.architecture, {})[rec.check] = rec
        if self.store is not None and self.run_id is not None:
            self.store.add_results(self.run_id, [rec])

    def arch_done(self, entry: ArchitectureEntry, trace: OpTrace | None) -> list[ResultRecord]:
        recs = sorted(self.by_arch.get(entry.name, {}).values(), key=lambda r: RUN_ORDER.index(r.check))
        self.report.results.extend(recs)
        if trace is not None:
            self.report.op_traces.append(trace)
            if self.store is not None and self.run_id is not None:
                self.store.add_op_traces(self.run_id, [trace])
        if self.json_path is not None and time.monotonic() - self._written >= JSON_EVERY_S:
            write_report(self.report, self.json_path)
            self._written = time.monotonic()
        return recs


def run_sweep(
    entries: Iterable[ArchitectureEntry],
    device: Device,
    checks: Iterable[Check | str],
    *,
    jobs: int,
    trigger: Trigger | str = Trigger.MANUAL,
    store: ResultSink | None = None,
    json_path: Path | None = None,
    progress: Progress | None = None,
    catalog_source: str = "registry",
    snapshot_id: str | None = None,
    seed: int | None = None,
    time_limit_s: float | None = None,
    memory_limit_mb: int | None = None,
    provenance: Provenance | None = None,
    scope: Scope | str = Scope.FULL,
    resume: tuple[RunInfo, set[tuple[str, str, str]]] | None = None,
    rerun_of: str | None = None,
    pool: Pool | None = None,
) -> Report:
    """Run every entry on ``device``; ``jobs=0`` runs in this process (no isolation; for debugging).
    ``provenance`` (submission runs) says which submitted id, revision and config the run measured; ``scope``
    whether ``entries`` is the whole catalog or a selection (a submission run's scope is always ``submission``, and
    its reproducers rebuild the submitted config). ``resume`` = (the run, its stored keys) from
    ``Store.resume_run``: that run goes on; architectures with every key stored are not run again, and no stored
    key is written again. ``rerun_of``: this run re-runs that run's regressed keys (the flake guard). ``pool``: warm
    workers to run on (``sweep_pool``, kept open by the caller for later phases); else a pool of its own."""
    settings = get_settings()
    entries = list(entries)
    if jobs > 0 and any(not e.remote_code for e in entries):
        check_memory_limit(memory_limit_mb or settings.arch_memory_mb)  # before the run exists: refused, not failed
    order = [c for c in RUN_ORDER if c in {Check(c) for c in checks}]
    seed = settings.seed if seed is None else seed
    stored: set[tuple[str, str, str]] = set()
    if resume is not None:
        run, stored = resume
    else:
        submitted = Trigger(trigger) == Trigger.SUBMISSION
        run = RunInfo(trigger=Trigger(trigger), device=device.info, versions=device_versions(device),
                      catalog_source=catalog_source, snapshot_id=snapshot_id,
                      scope=Scope.SUBMISSION if submitted else Scope(scope), checks=order, provenance=provenance,
                      determinants=run_determinants(device), rerun_of=rerun_of,
                      lane=settings.lane)
    sub_id = run.provenance.submission_id if run.provenance is not None else None
    repro = submission_repro(sub_id) if run.trigger == Trigger.SUBMISSION and sub_id is not None else repro_command
    report = Report(run=run, architectures=entries)
    run_id = None
    if store is not None:
        if resume is not None:
            run_id = run.id
        else:
            planned = [(e.name, device.name, str(c)) for e in entries for c in order]
            run_id = store.start_run(run, entries, planned)
    col = _Collector(report, store, run_id, json_path, stored)
    todo = [e for e in entries if any((e.name, device.name, str(c)) not in stored for c in order)]
    try:
        with heartbeat(store, run_id):
            local = [e for e in todo if e.remote_code or jobs == 0]
            remote = [e for e in todo if e not in local]
            if any(not e.remote_code for e in local):
                transformers.utils.logging.disable_progress_bar()  # in-process: keep the terminal for our bar
            for entry in local:
                traces: list[OpTrace] = []

                def emit(kind: str, payload: Any, traces: list[OpTrace] = traces) -> None:
                    if kind == "record":
                        col.add(payload)
                    elif kind == "trace":
                        traces.append(payload)

                judged = (resolve_runner(IN_PROCESS_RUNNER)(entry, device, order, seed=seed, emit=emit, repro=repro)
                          if not settings.run_hook else
                          resolve_runner(settings.run_hook)(entry, device.name, order, seed=seed, emit=emit))
                for rec in judged:
                    if rec.check not in col.by_arch.get(entry.name, {}):
                        col.add(rec)
                done = col.arch_done(entry, traces[-1] if traces else None)
                if progress:
                    progress(entry, done)
            if remote:
                _run_pool(remote, device, order, seed, jobs, col, progress,
                          time_limit_s or settings.arch_timeout_s, memory_limit_mb or settings.arch_memory_mb, repro,
                          pool)
    finally:
        report.run.finished = datetime.now(UTC)
        if store is not None and run_id is not None:
            store.finish_run(run_id)
            report.run.state, _planned, report.run.missing = store.run_state(run_id)
        else:
            report.run.missing = sum(1 for e in entries for c in order if c not in col.by_arch.get(e.name, {}))
            report.run.state = RunState.COMPLETE if report.run.missing == 0 else RunState.INCOMPLETE
        if json_path is not None:
            write_report(report, json_path)
    return report


def run_isolated(work: list[tuple[ArchitectureEntry, list[Check]]], device: Device, run: RunInfo, store: ResultSink,
                 *, seed: int | None = None, progress: Progress | None = None) -> Report:
    """Run each architecture's own checks in a fresh process of its own (a new one-worker pool per architecture:
    nothing an earlier architecture left in a process can touch it), as one stored run ``run``, started and closed
    here. The flake guard's re-run (``worker/orchestration/flake_guard.py``)."""
    settings = get_settings()
    seed = settings.seed if seed is None else seed
    report = Report(run=run, architectures=[e for e, _ in work])
    planned = [(e.name, device.name, str(c)) for e, checks in work for c in checks]
    run_id = store.start_run(run, report.architectures, planned)
    col = _Collector(report, store, run_id, None)
    try:
        with heartbeat(store, run_id):
            for entry, checks in work:
                order = [c for c in RUN_ORDER if c in {Check(c) for c in checks}]
                _run_pool([entry], device, order, seed, 1, col, progress, settings.arch_timeout_s,
                          settings.arch_memory_mb)
    finally:
        report.run.finished = datetime.now(UTC)
        store.finish_run(run_id)
        report.run.state, _planned, report.run.missing = store.run_state(run_id)
    return report


@contextmanager
def heartbeat(store: ResultSink | None, run_id: str | None, every_s: float = HEARTBEAT_S) -> Iterator[None]:
    """While the block runs, tell the store every ``every_s`` that this run's owner is alive (a thread: one
    architecture may store nothing for minutes). The run's lifecycle rule reads it (``compat.lifecycle``)."""
    if store is None or run_id is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                store.heartbeat(run_id)
            except Exception:  # noqa: BLE001 - a missed beat is retried; the sweep must not die of it
                pass

    thread = threading.Thread(target=beat, name=f"heartbeat-{run_id[:8]}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _run_pool(entries: list[ArchitectureEntry], device: Device, order: list[Check], seed: int, jobs: int,
              col: _Collector, progress: Progress | None, time_limit_s: float, memory_limit_mb: int,
              repro: ReproFn = repro_command, pool: Pool | None = None) -> None:
    by_name = {e.name: e for e in entries}
    # The runner by name (COMPAT_RUN_HOOK: a stand-in of run_on's signature for tests and benchmarks, no torch).
    hook = get_settings().run_hook
    # Entries, records and traces cross the pipe as objects; the device as its name, resolved once per worker.
    # The repro builder only to the real runner: a stand-in keeps run_on's older signature.
    kwargs = {"seed": seed} if hook else {"seed": seed, "repro": repro}
    tasks = [Task(e.name, hook or DEFAULT_RUNNER, (e, device.name, order), kwargs, stream=True) for e in entries]
    phases: dict[str, str | None] = {}
    traces: dict[str, OpTrace] = {}
    with ExitStack() as stack:
        if pool is None:
            pool = stack.enter_context(sweep_pool(device.name, min(jobs, len(entries)), time_limit_s=time_limit_s,
                                                  memory_limit_mb=memory_limit_mb))
        for ev in pool.run(tasks):
            name = ev.task.key
            entry = by_name[name]
            if ev.kind == "phase":
                phases[name] = ev.payload
            elif ev.kind == "record":
                col.add(ev.payload)
            elif ev.kind == "trace":
                traces[name] = ev.payload
            elif ev.done is not None:
                out = ev.done
                have = set(col.by_arch.get(name, {}))
                if out.kind == "ok":
                    # Every record streamed as it was judged; the runner prints nothing after its last one.
                    for rec in out.value:
                        if rec.check not in have:
                            col.add(rec)
                else:
                    for rec in abort_records(entry, device.name, order, have, phases.get(name), out, repro):
                        col.add(rec)
                done = col.arch_done(entry, traces.get(name))
                if progress:
                    progress(entry, done)


class InProcessExecutor:
    """Runs a plan on this machine through the sweep's isolated process pool (no broker), then finalizes it."""

    def __init__(self, device: Device, jobs: int = 1) -> None:
        self.device, self.jobs = device, jobs

    def run(self, store: Any, plan: SweepPlan, on_progress: ProgressFn | None = None,
            json_path: Path | None = None) -> RunOutcome:
        if plan.device != self.device.name:
            raise ValueError(f"plan for {plan.device!r}, executor on {self.device.name!r}")
        total, done = len(plan.entries), 0

        def tick(_entry: ArchitectureEntry, _records: list[ResultRecord]) -> None:
            nonlocal done
            done += 1
            if on_progress:
                on_progress(done, total)

        report = run_sweep(plan.entries, self.device, plan.checks, jobs=self.jobs, trigger=plan.run.trigger,
                           store=store, json_path=json_path, progress=tick, catalog_source=plan.run.catalog_source,
                           snapshot_id=plan.run.snapshot_id, seed=plan.seed, scope=plan.run.scope)
        return finalize(store, report.run.id, plan.device, str(plan.run.trigger))
