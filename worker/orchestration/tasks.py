"""Celery tasks of distributed sweeps: run one architecture (storing its own results), and the nightly sweep.

The worker's main process also records ``crash``/``timeout`` for a task whose pool process died or hit the hard limit.
That process imports this module and only supervises: the store and the harness (SQLAlchemy, Alembic, torch) are
imported where a task first needs them, in the pool processes it forks, so a worker is ready sooner.
"""

from __future__ import annotations

import logging
import os
import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from billiard.exceptions import TimeLimitExceeded, WorkerLostError
from celery import shared_task
from celery.signals import task_failure, worker_process_init
from sqlalchemy.exc import OperationalError

from compat.results import ArchitectureEntry, Check, Status
from compat.settings import get_settings
from compat.states import SubmissionState
from worker.orchestration import executors
from worker.orchestration.celery_app import NIGHTLY_TASK, RUN_ARCHITECTURE_TASK, SUBMISSION_TASK, time_limits
from worker.run.process.pool import ARCH_THREADS  # the pool's process helpers: no torch

if TYPE_CHECKING:
    from service.store import Store

log = logging.getLogger(__name__)


@lru_cache(maxsize=8)
def store_for(database_url: str) -> Store:
    """One Store per database per process (the engine owns the connection pool); migrations are the migrate
    service's job, but running them here is a no-op when already at head and makes a bare worker usable."""
    # Imported on first use, in a pool process (or a failure handler): the main process starts without it.
    from service.store import Store

    return Store(database_url)


@worker_process_init.connect
def _forget_inherited_connections(**_: Any) -> None:
    """A forked pool process must not reuse the parent's pooled DB sockets (two processes on one connection
    corrupt it): drop them without closing (closing would end the parent's session too)."""
    # The main process has engines only if a failure handler opened the store; importing here finds them.
    from service import db

    db.dispose_all(close=False)
    store_for.cache_clear()
    _warm_pool_process()


def _warm_pool_process() -> None:
    """The in-process pool's warm-up, so both executors run architectures alike: torch/transformers imported once
    per pool process (not inside the first task's time limit), Hub offline, progress bars off, threads pinned."""
    settings = get_settings()
    if settings.run_hook:
        return  # tests/benchmarks with a stand-in runner: no torch needed
    # Imported in the forked pool process, never in the worker's main process (see the module docstring).
    from worker.run.runner.runner import warm_worker

    try:
        # The in-process pool's thread count too: with one thread per core here, the Celery path took 1.48x the
        # in-process time on the 40-architecture bench, 1.31x with one (bench/README.md).
        warm_worker(ARCH_THREADS, settings.device)
    except Exception:  # noqa: BLE001 - a failing warm-up must not kill every new pool process in a loop
        log.exception("pool process warm-up failed; architectures will import lazily")


def _args(kwargs: dict[str, Any]) -> tuple[ArchitectureEntry, list[Check]]:
    return ArchitectureEntry.model_validate(kwargs["entry"]), [Check(c) for c in kwargs["checks"]]


def _maybe_finalize(store: Any, kwargs: dict[str, Any]) -> str | None:
    """Whoever writes the last architecture of a run closes it and diffs it (idempotent if two race)."""
    done = executors.progress(store, kwargs["run_id"])
    if done < kwargs["n_pairs"]:
        return None
    outcome = executors.finalize(store, kwargs["run_id"], kwargs["device"], kwargs["trigger"])
    log.info("run %s %s: %d regression(s)", outcome.run_id, outcome.state, len(outcome.diff.regressions))
    return outcome.state


@shared_task(
    name=RUN_ARCHITECTURE_TASK,
    bind=True,
    # Reruns after the pool process died under the task (task_retry_on_worker_lost); then it is a `crash`.
    max_retries=get_settings().crash_retries,
    default_retry_delay=1,
    # The store being briefly unreachable (PostgreSQL restart) is retried, not recorded as a result.
    autoretry_for=(OperationalError,),
    retry_backoff=True,
)
def run_architecture_task(self: Any, *, run_id: str, entry: dict[str, Any], device: str, checks: list[str],
                          seed: int, n_pairs: int, trigger: str) -> dict[str, Any]:
    """Run one architecture on one device and write its records to the store (skipped if already there)."""
    started = time.monotonic()  # a moment after the pool process accepted the task, when its time limits started
    kwargs = {"run_id": run_id, "entry": entry, "device": device, "checks": checks, "n_pairs": n_pairs,
              "trigger": trigger}
    arch, check_list = _args(kwargs)
    settings = get_settings()
    store = store_for(settings.database_url)
    workdir = settings.var_dir / "work" / run_id
    outcome = executors.run_pair(store, run_id, arch, device, check_list, seed=seed, workdir=workdir,
                                 soft_limit_s=time_limits(settings)[0], started=started)
    state = _maybe_finalize(store, kwargs)
    return {"architecture": arch.name, "device": device, "outcome": outcome, "attempt": self.request.retries + 1,
            "pid": os.getpid(), "run_state": state}


@task_failure.connect
def record_lost_or_timed_out(sender: Any = None, task_id: str | None = None, exception: BaseException | None = None,
                             kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    """In the worker's main process: the pool process of an architecture task died (after its bounded retries)
    or was killed at the hard time limit. Record ``crash``/``timeout`` so the run still ends complete."""
    if getattr(sender, "name", None) != RUN_ARCHITECTURE_TASK or not kwargs:
        return
    if isinstance(exception, TimeLimitExceeded):
        status, reason = Status.TIMEOUT, f"hard time limit exceeded ({exception.args[0] if exception.args else '?'} s)"
    elif isinstance(exception, WorkerLostError):
        tries = get_settings().crash_retries + 1
        status, reason = Status.CRASH, f"worker process died on each of {tries} attempt(s): {exception}"
    else:
        return  # raised inside the task: not a lost process, nothing the main process knows better
    entry, check_list = _args(kwargs)
    store = store_for(get_settings().database_url)
    try:
        written = executors.record_failure(store, kwargs["run_id"], entry, kwargs["device"], check_list, status,
                                           reason, type(exception).__name__)
        log.warning("%s %s on %s: %s%s", entry.name, status.value, kwargs["device"], reason,
                    "" if written else " (results already stored, kept)")
        _maybe_finalize(store, kwargs)
    finally:
        # Pool processes are forked from this one: leave no pooled DB connection for them to inherit.
        store_for.cache_clear()
        store.dispose()


@shared_task(name=NIGHTLY_TASK, bind=True)
def nightly_sweep_task(self: Any, lane: str | None = None) -> dict[str, Any]:
    """The beat's nightly job: plan a sweep with trigger ``nightly`` and fan it out on this cluster. ``lane``: the
    lane the beat meant (a lane's task is sent to its own queue, ``celery_app.lane_queue``); a worker of another lane
    refuses it rather than measure the wrong transformers under that lane's name."""
    # Planning reads the catalog and resolves the device (transformers, torch): in the pool process running this.
    from worker.orchestration.planning import nightly_plan

    settings = get_settings()
    if lane is not None and lane != settings.lane:
        raise ValueError(f"nightly of lane {lane!r} reached a worker of lane {settings.lane!r} (COMPAT_LANE): only "
                         f"workers with COMPAT_LANE={lane} may serve its queue (docker-compose.yml, worker-latest)")
    plan = nightly_plan(settings)
    run_id = executors.CeleryExecutor(self.app).submit(store_for(plan.database_url), plan)
    log.info("nightly run %s: %d architectures on %s submitted", run_id, len(plan.entries), plan.device)
    return {"run_id": run_id, "architectures": len(plan.entries), "device": plan.device}


@shared_task(name=SUBMISSION_TASK)
def run_submission_task(*, submission_id: int) -> str:
    """A user's submitted architecture (POST /submissions) run on the cluster, in the worker's own database;
    returns its final state."""
    # Imported in the pool process running it (the store, then torch): never in the worker's main process.
    from worker.orchestration.submissions import run_submission

    # jobs=0: run in this pool process, which Celery already isolates and time-limits; a daemonic pool process
    # may not start the sweep's own worker processes.
    return run_submission(submission_id, get_settings().database_url, jobs=0)


@task_failure.connect
def fail_lost_submission(sender: Any = None, exception: BaseException | None = None,
                         kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    """In the worker's main process: a submission whose pool process died or hit the hard limit is marked failed
    with the reason, instead of showing `running` forever."""
    if getattr(sender, "name", None) != SUBMISSION_TASK or not kwargs:
        return
    if not isinstance(exception, TimeLimitExceeded | WorkerLostError):
        return
    store = store_for(get_settings().database_url)
    try:
        store.set_submission_state(kwargs["submission_id"], SubmissionState.FAILED, error=f"{type(exception).__name__}: {exception}")
    finally:
        store_for.cache_clear()
        store.dispose()
