"""Executors of a sweep plan: Celery (one task per architecture, here) or in-process (``sweep.InProcessExecutor``).

Both run an architecture with worker.run.runner.runner.run_architecture and close the run with ``finalize`` (state + diff).
Imported by the Celery worker's main process, which forks the pool processes: nothing here imports torch.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat.diff import RunDiff, diff_results
from compat.results import (
    ArchitectureEntry,
    Check,
    ErrorInfo,
    OpTrace,
    ResultRecord,
    RunInfo,
    Status,
    failure_records,
)
from compat.settings import get_settings
from worker.orchestration.celery_app import RUN_ARCHITECTURE_TASK
from worker.run.process.by_name import resolve
from worker.run.process.capture import attach_log, captured_output

log = logging.getLogger(__name__)

# (entry, device name, checks, *, seed, workdir, emit) -> records: worker.run.runner.runner.run_on or a stand-in.
Runner = Callable[..., list[ResultRecord]]
ProgressFn = Callable[[int, int], None]
# Named, not imported: the runner (torch, transformers) loads in the process that runs architectures.
DEFAULT_RUNNER = "worker.run.runner.runner:run_on"
# The same runner in the calling process (an in-process sweep, jobs=0; remote-code entries, only marked skipped):
# it takes the Device itself. Named too, so a process whose architectures all run in workers never loads it.
IN_PROCESS_RUNNER = "worker.run.runner.runner:run_architecture"


@dataclass(frozen=True)
class SweepPlan:
    """One run: every architecture of ``entries`` on one device, the checks to judge, where results go."""

    run: RunInfo
    entries: list[ArchitectureEntry]
    checks: list[Check]
    database_url: str
    workdir: Path
    seed: int = 0

    @property
    def device(self) -> str:
        return self.run.device.name

    def planned_keys(self) -> list[tuple[str, str, str]]:
        return [(e.name, self.device, str(c)) for e in self.entries for c in self.checks]


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    state: str  # RunState.COMPLETE or INCOMPLETE (from Store.finish_run)
    diff: RunDiff
    results: list[ResultRecord] = field(default_factory=list)


def resolve_runner(hook: str | None = None) -> Runner:
    """The "run one architecture" function: ``DEFAULT_RUNNER``, or a test/benchmark hook (``COMPAT_RUN_HOOK``)."""
    hook = (get_settings().run_hook if hook is None else hook) or DEFAULT_RUNNER
    return resolve(hook)


def _failed(entry: ArchitectureEntry, device: str, checks: list[Check], status: Status, reason: str,
            error_type: str, duration_s: float = 0.0) -> list[ResultRecord]:
    """Records for an architecture whose run never returned a verdict (it raised, its process died or hung)."""
    return failure_records(entry, device, checks, status, reason, error=ErrorInfo(type=error_type, message=reason),
                           duration_s=duration_s)


def complete_records(entry: ArchitectureEntry, device: str, checks: list[Check],
                     records: list[ResultRecord]) -> list[ResultRecord]:
    """The runner's records for this pair, with a soft-time-limit error turned into ``timeout`` and a
    record for any planned check it forgot (so the run can still be complete and the gap is visible): ``harness_error``,
    since the runner promises a record per check and a missing one is the harness's bug, not the device's."""
    out = []
    for rec in records:
        if rec.error is not None and rec.error.type == "SoftTimeLimitExceeded":
            rec = rec.model_copy(update={"status": Status.TIMEOUT, "reason": "soft time limit exceeded"})
        out.append(rec)
    seen = {str(r.check) for r in out if r.architecture == entry.name and r.device == device}
    missing = [c for c in checks if str(c) not in seen]
    if missing:
        out += _failed(entry, device, missing, Status.HARNESS_ERROR, "runner returned no result for this check",
                       "MissingResult")
    return out


# A soft-limit signal earlier than this before the task's own limit cannot be that limit (the timer starts when the
# pool process accepts the task, a moment before the task body starts).
STRAY_SIGNAL_MARGIN_S = 1.0


def stray_soft_limit(elapsed_s: float, soft_limit_s: float | None) -> bool:
    """True when Celery's soft-limit exception reached a task well before that task's own soft limit: the signal
    was meant for an earlier task of the same pool process (its timer outlived it, e.g. across a broker reconnect)."""
    return soft_limit_s is not None and elapsed_s < soft_limit_s - STRAY_SIGNAL_MARGIN_S


def run_pair(store: Any, run_id: str, entry: ArchitectureEntry, device: str, checks: list[Check], *,
             seed: int, workdir: Path, runner: Runner | None = None, soft_limit_s: float | None = None,
             started: float | None = None) -> str:
    """Run one architecture on one device (by name: the runner resolves it in this process) and store its records,
    once, each with its log. Idempotent: a pair that already has results in this run (a redelivered task whose
    first delivery finished) is not run again. Returns "ran" or "skipped". ``soft_limit_s``/``started`` (monotonic,
    at the task's start): a soft-limit exception that cannot be this task's own is not recorded as the
    architecture's ``timeout``; the architecture is run once more instead."""
    started = time.monotonic() if started is None else started
    if (entry.name, device) in store.stored_pairs(run_id):
        return "skipped"
    runner = runner or resolve_runner()
    traces: list[OpTrace] = []

    def emit(kind: str, payload: Any) -> None:
        if kind == "trace":  # records come back as the return value; only the op trace is kept from events
            traces.append(payload)

    workdir.mkdir(parents=True, exist_ok=True)
    # The run's output goes with its results, as from the in-process pool (one file per delivery: a redelivered
    # copy of this task on another worker never shares it).
    fd, log_name = tempfile.mkstemp(prefix="arch-", suffix=".log", dir=workdir)
    os.close(fd)
    log_path = Path(log_name)
    try:
        with captured_output(log_path) as capture:
            records = _run_guarded(runner, entry, device, checks, seed, workdir, emit, soft_limit_s, started)
            rest = capture.take()  # what no record took: a stand-in runner's output, a traceback
    finally:
        log_path.unlink(missing_ok=True)
    records = complete_records(entry, device, checks, records)
    attach_log(records, rest)
    if traces:
        store.add_op_traces(run_id, [traces[-1]])
    store.add_results(run_id, records)  # the one write of these rows
    return "ran"


def _run_guarded(runner: Runner, entry: ArchitectureEntry, device: str, checks: list[Check], seed: int,
                 workdir: Path, emit: Callable[[str, Any], None], soft_limit_s: float | None,
                 started: float) -> list[ResultRecord]:
    """The runner's records, or records saying why it gave none: ``timeout`` for the task's own soft limit,
    ``harness_error`` for anything else it raised. A stray soft-limit signal gets the architecture one more run."""
    for attempt in (1, 2):
        try:
            return runner(entry, device, checks, seed=seed, workdir=workdir, emit=emit)
        except Exception as exc:  # noqa: BLE001 - the runner promises not to raise; a hook or a bug might
            traceback.print_exc()
            took = time.monotonic() - started
            if type(exc).__name__ != "SoftTimeLimitExceeded":  # Celery's soft limit, raised in the runner
                return _failed(entry, device, checks, Status.HARNESS_ERROR, f"runner raised: {exc}"[:500],
                               type(exc).__name__, took)
            if attempt == 1 and stray_soft_limit(took, soft_limit_s):
                # Not this architecture's time: blaming it would report the harness's signal as the device's
                # timeout. Its output says so; the run starts again within the task's own limits.
                print(f"compat: soft time limit signal after {took:.1f} s of a {soft_limit_s:.0f} s limit: not this "
                      "task's; running the architecture again", flush=True)
                log.warning("%s on %s: stray soft time limit signal after %.1f s; rerunning", entry.name, device, took)
                continue
            return _failed(entry, device, checks, Status.TIMEOUT, "soft time limit exceeded",
                           "SoftTimeLimitExceeded", took)
    raise AssertionError("unreachable: the second attempt always returns")


def record_failure(store: Any, run_id: str, entry: ArchitectureEntry, device: str, checks: list[Check],
                   status: Status, reason: str, error_type: str) -> bool:
    """Write crash/timeout records unless the pair already has results (first writer wins). True if written."""
    if (entry.name, device) in store.stored_pairs(run_id):
        return False
    store.add_results(run_id, _failed(entry, device, checks, status, reason, error_type))
    return True


def progress(store: Any, run_id: str) -> int:
    """How many architectures of a run have results."""
    return len(store.stored_pairs(run_id))


def finalize(store: Any, run_id: str, device: str, trigger: str) -> RunOutcome:
    """Close the run (complete/incomplete) and diff it against its baseline of the same trigger
    (``service.runs.baseline_run``). Idempotent: the last task, the failure recorder and a following CLI may all call it."""
    state = store.finish_run(run_id)
    current = store.run_results(run_id)
    baseline_id = store.baseline_run_id(run_id, trigger=trigger)
    baseline = store.run_results(baseline_id) if baseline_id else []
    diff = diff_results(baseline, current, baseline_run=baseline_id, current_run=run_id,
                        only=store.selection(run_id))
    for change in diff.regressions:
        log.warning("regression in run %s: %s", run_id, change.line())
    return RunOutcome(run_id=run_id, state=state, diff=diff, results=current)


def start(store: Any, plan: SweepPlan) -> str:
    # Fanned out to the broker: no process here owns the run; the results the workers store are its heartbeat.
    return store.start_run(plan.run, plan.entries, plan.planned_keys(), owned=False)


def task_kwargs(plan: SweepPlan, run_id: str, entry: ArchitectureEntry) -> dict[str, Any]:
    """The JSON message of one architecture task. No database URL or path: workers use their own COMPAT_DATABASE_URL
    and scratch space; credentials never sit in the broker, and a message cannot point a worker at another
    database or directory."""
    return {"run_id": run_id, "entry": entry.model_dump(mode="json"), "device": plan.device,
            "checks": [str(c) for c in plan.checks], "seed": plan.seed, "n_pairs": len(plan.entries),
            "trigger": str(plan.run.trigger)}


class CeleryExecutor:
    """Fans a plan out as one Celery task per architecture and follows the run through the store."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def submit(self, store: Any, plan: SweepPlan) -> str:
        run_id = start(store, plan)
        queue = self.app.conf.task_default_queue
        for entry in plan.entries:
            self.app.send_task(RUN_ARCHITECTURE_TASK, kwargs=task_kwargs(plan, run_id, entry), queue=queue)
        return run_id

    def follow(self, store: Any, plan: SweepPlan, run_id: str, *, stall_timeout_s: float,
               poll_s: float = 0.25, on_progress: ProgressFn | None = None) -> RunOutcome:
        """Wait until every architecture has results, or nothing new arrived for ``stall_timeout_s`` (then the
        run is closed ``incomplete``); then finalize it (idempotent if the last task already did).
        The poll is one narrow DISTINCT query; at 1 s it left up to a second idle after the last task."""
        total = len(plan.entries)
        last_done, last_change = -1, time.monotonic()
        while True:
            done = progress(store, run_id)
            if done != last_done:
                last_done, last_change = done, time.monotonic()
                if on_progress:
                    on_progress(done, total)
            if done >= total or time.monotonic() - last_change > stall_timeout_s:
                break
            time.sleep(poll_s)
        return finalize(store, run_id, plan.device, str(plan.run.trigger))

    def run(self, store: Any, plan: SweepPlan, on_progress: ProgressFn | None = None) -> RunOutcome:
        settings = get_settings()
        # No progress for longer than a task may take plus its redelivery delay means tasks were lost.
        stall = settings.visibility_timeout_s + settings.arch_timeout_s + settings.task_hard_grace_s
        return self.follow(store, plan, self.submit(store, plan), stall_timeout_s=stall, on_progress=on_progress)
