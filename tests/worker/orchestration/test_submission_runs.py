"""Issue 13's findings on running submissions, one test each: one bounded queue (7 ran at once on 2 cores), a run with
no device verdict ends ``failed`` with the reason, an auto_map on native classes is ignored (and said), and the
entry's NaN/Infinity survive the Celery message."""

from __future__ import annotations

import json
import math
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kombu.utils.json import dumps, loads

from compat.results import ArchitectureEntry, Check, Report, ResultRecord, RunInfo, Status, Trigger
from compat.settings import get_settings
from service import db
from service.models import Submission
from service.store import Store
from worker.orchestration import submissions
from worker.orchestration.executors import SweepPlan, task_kwargs
from worker.orchestration.submissions import (
    SubmissionQueue,
    no_verdict_reason,
    run_submission,
    submission_entry,
)
from worker.run.process.pool import Pool, Task

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


def _rec(status: Status, check: Check = Check.LOAD, reason: str | None = None) -> ResultRecord:
    return ResultRecord(architecture="LlamaForCausalLM", device="cpu", check=check, status=status, reason=reason)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_in_process_queue_runs_at_most_n_at_a_time_in_order(monkeypatch: pytest.MonkeyPatch,
                                                                 workers: int) -> None:
    running, peak, order = [0], [0], []
    lock = threading.Lock()

    def fake_run(submission_id: int, database_url: str) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            order.append(submission_id)
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return "done"

    monkeypatch.setattr(submissions, "run_submission", fake_run)
    q = SubmissionQueue()
    for sid in range(1, 8):  # the 7 submissions
        q.put(sid, "sqlite://", workers)
    q.join()
    assert peak[0] == workers and sorted(order) == list(range(1, 8))
    if workers == 1:
        assert order == list(range(1, 8))  # FIFO


def test_enqueue_without_a_broker_uses_the_bounded_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, str, int]] = []
    monkeypatch.setattr(submissions.LOCAL_QUEUE, "put", lambda sid, url, workers: calls.append((sid, url, workers)))
    monkeypatch.setenv("COMPAT_SUBMISSION_WORKERS", "3")
    monkeypatch.delenv("COMPAT_BROKER_URL", raising=False)
    get_settings.cache_clear()
    try:
        submissions.enqueue_submission(5, "sqlite:///x.db")
    finally:
        get_settings.cache_clear()
    assert calls == [(5, "sqlite:///x.db", 3)]


def test_no_device_verdict_is_named() -> None:
    assert no_verdict_reason([_rec(Status.PASS), _rec(Status.REFERENCE_FAIL, Check.FORWARD)]) is None
    assert no_verdict_reason([_rec(Status.MISMATCH)]) is None  # a failure on the device is a verdict
    reason = no_verdict_reason([_rec(Status.REFERENCE_FAIL, reason="reference output is not finite"),
                                _rec(Status.HARNESS_ERROR, Check.FORWARD), _rec(Status.SKIPPED, Check.GENERATE)])
    assert reason == ("no device verdict: every check ended harness_error, reference_fail, skipped "
                      "(reference output is not finite)")


def _add(url: str, config: dict) -> int:
    with db.session_scope(url) as s:
        now = datetime.now(UTC)
        sub = Submission(config=config, state="queued", created=now, updated=now)
        s.add(sub)
        s.flush()
        return sub.id


def test_a_run_with_only_reference_failures_ends_failed(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Finding 6: it ended "done", like a good one.
    Store(sqlite_url)
    sid = _add(sqlite_url, LLAMA)
    seen = {}

    def fake_sweep(entries, device, checks, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.update(kw)
        run = RunInfo(trigger=Trigger.SUBMISSION, device=device.info, provenance=kw["provenance"])
        kw["store"].start_run(run, entries, [])
        return Report(run=run, results=[_rec(Status.REFERENCE_FAIL, c, "cpu reference failed") for c in checks])

    monkeypatch.setattr("worker.orchestration.sweep.run_sweep", fake_sweep)
    assert run_submission(sid, sqlite_url) == "failed"
    assert Store(sqlite_url).submission(sid)["state"] == "failed"
    with db.session_scope(sqlite_url) as s:
        row = s.get(Submission, sid)
        assert row.error.startswith("no device verdict: every check ended reference_fail") and row.run_id
        assert row.config_digest and seen["provenance"].config_digest == row.config_digest
        assert seen["provenance"].submission_id == sid


def test_native_auto_map_is_ignored_and_noted_remote_code_is_skipped_with_its_reason() -> None:
    entry = submission_entry({"config": {**LLAMA, "auto_map": {"AutoModelForCausalLM": "m.X"}}, "model_id": None,
                              "revision": None})
    assert not entry.remote_code and entry.notes[0].startswith("auto_map ignored: LlamaForCausalLM")
    kimi = submission_entry({"config": {**LLAMA, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
                                        "auto_map": {"AutoConfig": "c.C"}}, "model_id": None, "revision": None})
    assert kimi.remote_code and kimi.notes[0].startswith("remote code: model_type 'kimi_k2' is not native")


def test_non_finite_config_survives_the_celery_message() -> None:
    # Finding 2: model_dump(mode="json") turned Infinity into null on the way to the builder.
    entry = ArchitectureEntry(name="NemotronHForCausalLM", model_type="nemotron_h", rank=1,
                              config={"time_step_limit": [0.0, math.inf], "x": math.nan})
    plan = SweepPlan(run=RunInfo(device={"name": "cpu"}), entries=[entry], checks=[Check.LOAD],
                     database_url="sqlite://", workdir=Path("."))
    wire = loads(dumps(task_kwargs(plan, "r1", entry)))  # Celery's JSON serializer, both ways
    back = ArchitectureEntry.model_validate(wire["entry"])
    assert back.config["time_step_limit"] == [0.0, math.inf] and math.isnan(back.config["x"])
    report = Report.model_validate_json(Report(run=plan.run, architectures=[entry]).model_dump_json())
    assert report.architectures[0].config["time_step_limit"][1] == math.inf  # and the JSON report
    assert json.loads(json.dumps(entry.model_dump(mode="json")))["config"]["time_step_limit"][1] == math.inf
    # And the pool's pipe, both ways (an isolated worker process gets the entry and sends it back).
    with Pool(1, time_limit_s=60, memory_limit_mb=2000, warmup=None) as pool:
        [done] = [ev.done for ev in pool.run([Task("echo", "copy:deepcopy", (entry,))]) if ev.done is not None]
    assert done.kind == "ok" and done.value.config["time_step_limit"] == [0.0, math.inf]
