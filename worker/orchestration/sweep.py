"""``run_sweep``: fan a catalog out over the worker pool, collect records as they stream in, persist each one.

Results go to the store (if given) as each check finishes and to the JSON report after each architecture, so a
crash of the sweep itself loses nothing already judged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from compat.results import ArchitectureEntry, Check, OpTrace, Report, ResultRecord, RunInfo, Status, Trigger
from compat.settings import get_settings
from worker.run.capture import attach_log
from worker.run.checks import RUN_ORDER
from worker.run.devices import Device, device_versions, resolve_device
from worker.run.pool import Outcome, Pool, Task
from worker.run.runner import ARCH_THREADS, repro_command, run_architecture

# Pool outcome kind -> the status of the check that was running when the worker was stopped.
ABORT_STATUS = {"crash": Status.CRASH, "timeout": Status.TIMEOUT, "memory": Status.OOM, "error": Status.ERROR}
REFERENCE_PHASES = frozenset({"build", "reference", None})


class ResultSink(Protocol):
    def start_run(self, run: RunInfo, architectures: list[ArchitectureEntry],
                  planned: list[tuple[str, str, str]]) -> str: ...
    def add_results(self, run_id: str, records: list[ResultRecord]) -> None: ...
    def add_op_traces(self, run_id: str, traces: list[OpTrace]) -> None: ...
    def finish_run(self, run_id: str) -> str: ...


Progress = Callable[[ArchitectureEntry, list[ResultRecord]], None]


def abort_records(entry: ArchitectureEntry, device: str, checks: list[Check], have: set[Check],
                  phase: str | None, outcome: Outcome) -> list[ResultRecord]:
    """Records for the checks a stopped worker never reported (pure).

    The check that was running gets crash/timeout/oom; later ones are skipped. A worker stopped while building
    or running the CPU reference is the harness's problem, so those become reference_fail, never the device's.
    """
    missing = [c for c in checks if c not in have]
    why = outcome.error.splitlines()[-1] if outcome.error else outcome.kind
    status = ABORT_STATUS.get(outcome.kind, Status.CRASH)
    out = []
    running = phase if phase not in REFERENCE_PHASES else None
    for c in missing:
        base = {"architecture": entry.name, "rank": entry.rank, "device": device, "check": c,
                "duration_s": outcome.duration_s if str(c) == running else 0.0, "peak_mem_mb": outcome.peak_rss_mb}
        if running is None:
            out.append(ResultRecord(**base, status=Status.REFERENCE_FAIL,
                                    reason=f"worker {outcome.kind} during {phase or 'start'}: {why}"))
        elif str(c) == running:
            out.append(ResultRecord(**base, status=status, reason=f"worker {outcome.kind}: {why}",
                                    metrics={"exitcode": outcome.exitcode} if outcome.exitcode is not None else {},
                                    repro=repro_command(entry.name, device, c)))
        else:
            out.append(ResultRecord(**base, status=Status.SKIPPED, reason=f"worker {outcome.kind} during {running}"))
    return out


def write_report(report: Report, path: Path) -> None:
    """Atomic rewrite: a reader (or a crash mid-write) never sees a half-written report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report.model_dump(mode="json"), indent=1))
    os.replace(tmp, path)


class _Collector:
    """Holds the run's records, dedupes by key, and pushes to the store / JSON at the right moments."""

    def __init__(self, report: Report, store: ResultSink | None, run_id: str | None, json_path: Path | None):
        self.report, self.store, self.run_id, self.json_path = report, store, run_id, json_path
        self.by_arch: dict[str, dict[Check, ResultRecord]] = {}

    def add(self, rec: ResultRecord, persist: bool = True) -> None:
        self.by_arch.setdefault(rec.architecture, {})[rec.check] = rec
        if persist and self.store is not None and self.run_id is not None:
            self.store.add_results(self.run_id, [rec])

    def arch_done(self, entry: ArchitectureEntry, trace: OpTrace | None, log: str = "") -> list[ResultRecord]:
        recs = sorted(self.by_arch.get(entry.name, {}).values(), key=lambda r: RUN_ORDER.index(r.check))
        attach_log(recs, log)
        self.report.results.extend(recs)
        if trace is not None:
            self.report.op_traces.append(trace)
        if self.store is not None and self.run_id is not None:
            self.store.add_results(self.run_id, recs)  # idempotent upsert; now with logs
            if trace is not None:
                self.store.add_op_traces(self.run_id, [trace])
        if self.json_path is not None:
            write_report(self.report, self.json_path)
        return recs


def run_sweep(
    entries: Iterable[ArchitectureEntry],
    device: str | Device,
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
) -> Report:
    """Run every entry on ``device``; ``jobs=0`` runs in this process (no isolation; for debugging)."""
    settings = get_settings()
    entries = list(entries)
    order = [c for c in RUN_ORDER if c in {Check(c) for c in checks}]
    dev = device if isinstance(device, Device) else resolve_device(device)
    seed = settings.seed if seed is None else seed
    run = RunInfo(trigger=Trigger(trigger), device=dev.info, versions=device_versions(dev),
                  catalog_source=catalog_source, snapshot_id=snapshot_id, checks=order)
    report = Report(run=run, architectures=entries)
    run_id = None
    if store is not None:
        planned = [(e.name, dev.name, str(c)) for e in entries for c in order]
        run_id = store.start_run(run, entries, planned)
    col = _Collector(report, store, run_id, json_path)
    try:
        local = [e for e in entries if e.remote_code or jobs == 0]
        remote = [e for e in entries if e not in local]
        if any(not e.remote_code for e in local):
            import transformers

            transformers.utils.logging.disable_progress_bar()  # in-process: keep the terminal for our bar
        for entry in local:
            events: list[tuple[str, Any]] = []
            recs = run_architecture(entry, dev, order, seed=seed, emit=lambda k, p, ev=events: ev.append((k, p)))
            for rec in recs:
                col.add(rec)
            traces = [OpTrace.model_validate(p) for k, p in events if k == "trace"]
            done = col.arch_done(entry, traces[-1] if traces else None)
            if progress:
                progress(entry, done)
        if remote:
            _run_pool(remote, dev, order, seed, jobs, col, progress,
                      time_limit_s or settings.arch_timeout_s, memory_limit_mb or settings.arch_memory_mb)
    finally:
        report.run.finished = datetime.now(UTC)
        if store is not None and run_id is not None:
            store.finish_run(run_id)
        if json_path is not None:
            write_report(report, json_path)
    return report


def _run_pool(entries: list[ArchitectureEntry], dev: Device, order: list[Check], seed: int, jobs: int,
              col: _Collector, progress: Progress | None, time_limit_s: float, memory_limit_mb: int) -> None:
    by_name = {e.name: e for e in entries}
    checks = [str(c) for c in order]
    tasks = [Task(e.name, "worker.run.runner:pool_job", (e.model_dump(mode="json"), dev.name, checks, seed), stream=True)
             for e in entries]
    phases: dict[str, str | None] = {}
    traces: dict[str, OpTrace] = {}
    with Pool(min(jobs, len(entries)), time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb,
              warmup="worker.run.runner:warm_worker", warmup_args=(ARCH_THREADS, dev.name)) as pool:
        for ev in pool.run(tasks):
            name = ev.task.key
            entry = by_name[name]
            if ev.kind == "phase":
                phases[name] = ev.payload["phase"]
            elif ev.kind == "record":
                col.add(ResultRecord.model_validate(ev.payload))
            elif ev.kind == "trace":
                traces[name] = OpTrace.model_validate(ev.payload)
            elif ev.done is not None:
                out = ev.done
                have = set(col.by_arch.get(name, {}))
                if out.kind == "ok":
                    for payload in out.value:
                        rec = ResultRecord.model_validate(payload)
                        if rec.check not in have:
                            col.add(rec)
                else:
                    for rec in abort_records(entry, dev.name, order, have, phases.get(name), out):
                        col.add(rec)
                done = col.arch_done(entry, traces.get(name), out.log)
                if progress:
                    progress(entry, done)
