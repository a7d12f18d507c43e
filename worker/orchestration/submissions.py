"""Running a user's submission (a Hub model id or an uploaded config.json) as a one-architecture sweep.

``enqueue_submission`` is what ``serve.create_app`` hands the service's app factory: with a broker configured it
sends a Celery task (the broker's queue bounds the runs), without one it puts the id on this process's one bounded
queue, which ``COMPAT_SUBMISSION_WORKERS`` threads (default 1) drain, one submission each at a time.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from compat.configjson import config_digest
from compat.results import (
    DEFAULT_CHECKS,
    FAILURE_STATUSES,
    ArchitectureEntry,
    Provenance,
    ResultRecord,
    Status,
    Trigger,
)
from compat.settings import get_settings
from compat.states import SubmissionState
from service.store import Store
from service.submissions import HUB_CONFIG_NOTE
from worker.catalog.hub import HubError, code_verdict, fetch_config, resolve_endpoint
from worker.orchestration.celery_app import SUBMISSION_TASK, client_app

log = logging.getLogger(__name__)
HUB_TIMEOUT_S = 10.0  # reading one config.json; the submitter is waiting on it when the id is checked at submit


class SubmissionQueue:
    """The in-process queue of submission runs: FIFO, at most ``workers`` running at once (threads started on
    first use). Queue positions shown to submitters come from the store (queued rows, oldest first)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[int, str]] = queue.Queue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def put(self, submission_id: int, database_url: str, workers: int) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < workers:
                t = threading.Thread(target=self._drain, daemon=True, name=f"submissions-{len(self._threads)}")
                t.start()
                self._threads.append(t)
        self._queue.put((submission_id, database_url))

    def _drain(self) -> None:
        while True:
            submission_id, database_url = self._queue.get()
            try:
                run_submission(submission_id, database_url)
            except Exception:  # noqa: BLE001 - run_submission records its own failures; keep serving the queue
                log.exception("submission %s: runner raised", submission_id)
            finally:
                self._queue.task_done()

    def join(self) -> None:
        """Wait until every queued submission has run (tests)."""
        self._queue.join()


LOCAL_QUEUE = SubmissionQueue()


def enqueue_submission(submission_id: int, database_url: str) -> None:
    """Queue the submission's run (returns at once): on the Celery cluster when a broker is configured, else on
    this process's bounded queue."""
    settings = get_settings()
    if settings.broker_url:
        # The worker writes to its own COMPAT_DATABASE_URL (the same database in a deployment): no credentials
        # travel through the broker.
        client_app().send_task(SUBMISSION_TASK, kwargs={"submission_id": submission_id})
        return
    LOCAL_QUEUE.put(submission_id, database_url, settings.submission_workers)


def hub_config(model_id: str, revision: str | None) -> dict[str, Any]:
    """config.json of a Hub repo (JSON only: no code, no weights), capped and validated like the catalog's."""
    return fetch_config(model_id, endpoint=resolve_endpoint(), revision=revision or "main", timeout=HUB_TIMEOUT_S)


def submission_entry(sub: dict[str, Any]) -> ArchitectureEntry:
    """The entry a submission becomes, under the one remote-code rule (an auto_map on native classes is ignored
    and noted; remote code becomes a skipped entry that says why); its config is shrunk like any other."""
    cfg = sub["config"] if sub["config"] is not None else hub_config(sub["model_id"], sub["revision"])
    archs = cfg.get("architectures") or []
    if not archs or not isinstance(cfg.get("model_type"), str):
        raise ValueError("config.json must name its model_type and architectures")
    verdict = code_verdict(cfg)
    notes = [f"remote code: {verdict.reason}"] if verdict.remote_code else list(verdict.notes)
    return ArchitectureEntry(name=archs[0], model_type=cfg["model_type"], rank=1, representative=sub["model_id"],
                             config=cfg, remote_code=verdict.remote_code, notes=notes)


def no_verdict_reason(records: list[ResultRecord]) -> str | None:
    """Why a run judged nothing on the device (every check reference_fail, harness_error or skipped), else None."""
    if any(r.status == Status.PASS or r.status in FAILURE_STATUSES for r in records):
        return None
    if not records:
        return "no device verdict: the run recorded no result"
    first = records[0]
    return f"no device verdict: every check ended {', '.join(sorted({str(r.status) for r in records}))}" + \
        (f" ({first.reason})" if first.reason else "")


def run_submission(submission_id: int, database_url: str, jobs: int = 1) -> str:
    """Run one submission to its end state; returns the submission's final state."""
    # Imported in the process that runs the submission (torch, the neuron backend): the API process stays free
    # of them until a submission runs in it.
    from worker.orchestration.sweep import run_sweep
    from worker.run.process.devices import resolve_device

    store = Store(database_url)
    sub = store.submission(submission_id)
    if sub is None or sub["state"] != SubmissionState.QUEUED:
        return sub["state"] if sub else "missing"
    try:
        entry = submission_entry(sub)
        digest = sub["config_digest"] or config_digest(entry.config)
        fetched = sub["config"] is None  # a Hub id: keep the config it had now, the repro must not depend on the Hub
        store.set_submission_state(submission_id, SubmissionState.RUNNING, architecture=entry.name, config_digest=digest,
                                   notes=[*entry.notes, *([HUB_CONFIG_NOTE] if fetched else [])],
                                   config=entry.config if fetched else None)
        settings = get_settings()
        provenance = Provenance(submission_id=submission_id, model_id=sub["model_id"], revision=sub["revision"],
                                config_digest=digest)
        # jobs=1: the architecture still runs in an isolated, time- and memory-limited process. A Celery task
        # passes jobs=0: its pool process is that isolation already (and may not fork children of its own).
        report = run_sweep([entry], resolve_device(settings.device), list(DEFAULT_CHECKS), jobs=jobs,
                           trigger=Trigger.SUBMISSION, store=store, catalog_source="submission",
                           provenance=provenance)
        failed = no_verdict_reason(report.results)
        if failed:
            store.set_submission_state(submission_id, SubmissionState.FAILED, run_id=report.run.id, error=failed)
            return SubmissionState.FAILED
        store.set_submission_state(submission_id, SubmissionState.DONE, run_id=report.run.id)
        return SubmissionState.DONE
    except HubError as e:  # an expected refusal (Hub unreachable, bad config): one log line, no traceback
        log.warning("submission %s failed: %s", submission_id, e)
        store.set_submission_state(submission_id, SubmissionState.FAILED, error=str(e))
        return SubmissionState.FAILED
    except Exception as e:  # the submitter sees why in GET /submissions/{id}
        log.exception("submission %s failed", submission_id)
        store.set_submission_state(submission_id, SubmissionState.FAILED, error=f"{type(e).__name__}: {e}")
        return SubmissionState.FAILED
