"""Running a user's submission (a Hub model id or an uploaded config.json) as a one-architecture sweep.

``enqueue_submission`` is what ``serve.create_app`` hands the service's app factory: with a broker configured it
sends a Celery task to the cluster, without one it runs the submission on a background thread of this process.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from huggingface_hub import hf_hub_download

from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Trigger
from compat.settings import get_settings
from service.store import Store
from worker.orchestration.celery_app import SUBMISSION_TASK, client_app

log = logging.getLogger(__name__)


def enqueue_submission(submission_id: int, database_url: str) -> None:
    """Start the submission's run in the background (returns at once): on the Celery cluster when a broker is
    configured, else on a thread of this process."""
    if get_settings().broker_url:
        # The worker writes to its own COMPAT_DATABASE_URL (the same database in a deployment): no credentials
        # travel through the broker.
        client_app().send_task(SUBMISSION_TASK, kwargs={"submission_id": submission_id})
        return
    threading.Thread(target=run_submission, args=(submission_id, database_url), daemon=True,
                     name=f"submission-{submission_id}").start()


def _hub_config(model_id: str, revision: str | None) -> dict[str, Any]:
    """config.json of a Hub model (JSON only: no code, no weights)."""
    path = hf_hub_download(model_id, "config.json", revision=revision)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def submission_entry(sub: dict[str, Any]) -> ArchitectureEntry:
    """The catalog entry a submission becomes; its config is shrunk by the sweep like any other."""
    cfg = sub["config"] if sub["config"] is not None else _hub_config(sub["model_id"], sub["revision"])
    if "auto_map" in cfg:
        raise ValueError("this architecture requires trust_remote_code, which is never enabled")
    archs = cfg.get("architectures") or []
    if not archs or not isinstance(cfg.get("model_type"), str):
        raise ValueError("config.json must name its model_type and architectures")
    return ArchitectureEntry(name=archs[0], model_type=cfg["model_type"], rank=1,
                             representative=sub["model_id"], config=cfg)


def run_submission(submission_id: int, database_url: str, jobs: int = 1) -> str:
    """Run one submission to its end state; returns the submission's final state."""
    # Imported in the process that runs the submission (torch, the neuron backend): the API process stays free
    # of them until a submission runs in it.
    from worker.orchestration.sweep import run_sweep
    from worker.run.devices import resolve_device

    store = Store(database_url)
    sub = store.submission(submission_id)
    if sub is None or sub["state"] != "queued":
        return sub["state"] if sub else "missing"
    try:
        entry = submission_entry(sub)
        store.set_submission_state(submission_id, "running", architecture=entry.name)
        settings = get_settings()
        # jobs=1: the architecture still runs in an isolated, time- and memory-limited process. A Celery task
        # passes jobs=0: its pool process is that isolation already (and may not fork children of its own).
        report = run_sweep([entry], resolve_device(settings.device), list(DEFAULT_CHECKS), jobs=jobs,
                           trigger=Trigger.SUBMISSION, store=store, catalog_source="submission")
        store.set_submission_state(submission_id, "done", run_id=report.run.id)
        return "done"
    except Exception as e:  # the submitter sees why in GET /submissions/{id}
        log.exception("submission %s failed", submission_id)
        store.set_submission_state(submission_id, "failed", error=f"{type(e).__name__}: {e}")
        return "failed"
