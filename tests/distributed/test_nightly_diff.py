"""Regression gate and nightly schedule: the regression rule (compat.diff), the gate of worker.orchestration.nightly
(and the beat schedule built from its cron rule), on hand-made records."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from compat.diff import diff_results, format_diff
from compat.results import Check, ErrorInfo, ResultRecord, Status
from worker.orchestration.celery_app import beat_schedule, parse_cron
from worker.orchestration.nightly import BaselineSpec, find_baseline, parse_baseline, regression_gate


def rec(arch: str, check: Check, status: Status, **kw) -> ResultRecord:
    return ResultRecord(architecture=arch, device="neuron", check=check, status=status, **kw)


def test_pass_to_failure_is_a_regression_and_nothing_else_is():
    base = [rec("Llama", Check.FORWARD, Status.PASS), rec("Llama", Check.GENERATE, Status.PASS),
            rec("Gpt2", Check.FORWARD, Status.MISMATCH), rec("Opt", Check.FORWARD, Status.PASS),
            rec("Bloom", Check.TRAIN, Status.PASS), rec("Phi", Check.LOAD, Status.ERROR)]
    now = [rec("Llama", Check.FORWARD, Status.UNSUPPORTED_OP, blocking_op="aten::histc (Long)"),
           rec("Llama", Check.GENERATE, Status.SKIPPED, reason="forward failed"),
           rec("Gpt2", Check.FORWARD, Status.PASS),
           rec("Opt", Check.FORWARD, Status.PASS),
           rec("Phi", Check.LOAD, Status.OOM),
           rec("Mistral", Check.LOAD, Status.CRASH)]
    diff = diff_results(base, now, baseline_run="b", current_run="c")
    assert [(c.architecture, c.check, c.before, c.after) for c in diff.regressions] == [
        ("Llama", "forward", "pass", "unsupported_op")]
    assert diff.regressions[0].detail == "aten::histc (Long)"
    # A pass that is now skipped or absent is not shown to fail on the device: reported as missing.
    assert sorted((c.architecture, c.check) for c in diff.missing) == [("Bloom", "train"), ("Llama", "generate")]
    assert [(c.architecture, c.after) for c in diff.fixes] == [("Gpt2", "pass")]
    assert sorted((c.architecture, c.before, c.after) for c in diff.other) == [
        ("Mistral", None, "crash"), ("Phi", "error", "oom")]


@pytest.mark.parametrize("status", sorted(s.value for s in Status))
def test_each_status_after_a_pass(status: str):
    diff = diff_results([rec("A", Check.LOAD, Status.PASS)], [rec("A", Check.LOAD, Status(status))])
    failing = {"mismatch", "unsupported_op", "unsupported_dtype", "oom", "error", "crash", "timeout"}
    assert bool(diff.regressions) == (status in failing)
    # No verdict about the device now: not run (skipped), the CPU reference failed (reference_fail), or the
    # harness itself failed (harness_error, issue 13: shrinker, builder, limits; compat/results.py blames it on
    # neither device nor CPU). The pass is missing from this run, not a device regression.
    assert bool(diff.missing) == (status in {"skipped", "reference_fail", "harness_error"})


def test_no_baseline_means_no_regression_and_devices_are_separate_keys():
    now = [rec("A", Check.LOAD, Status.ERROR)]
    assert diff_results([], now).regressions == []
    other_device = [ResultRecord(architecture="A", device="cuda", check=Check.LOAD, status=Status.PASS)]
    assert diff_results(other_device, now).regressions == []


def test_format_diff_prints_every_regression_with_its_reason():
    base = [rec("A", Check.LOAD, Status.PASS), rec("B", Check.FORWARD, Status.PASS)]
    now = [rec("A", Check.LOAD, Status.ERROR, error=ErrorInfo(type="RuntimeError", message="boom")),
           rec("B", Check.FORWARD, Status.TIMEOUT)]
    text = format_diff(diff_results(base, now, baseline_run="r1", current_run="r2"))
    lines = text.splitlines()
    assert lines[0].startswith("run r2 vs baseline r1: 2 regression(s)")
    assert "REGRESSION A [neuron] load: pass -> error  (RuntimeError: boom)" in lines
    assert "REGRESSION B [neuron] forward: pass -> timeout" in lines


def test_parse_baseline():
    assert parse_baseline("last-nightly") == BaselineSpec(trigger="nightly")
    assert parse_baseline("last") == BaselineSpec()
    assert parse_baseline("0123abcd") == BaselineSpec(run_id="0123abcd")
    for bad in ("last-weekly", "", "x;drop table runs"):
        with pytest.raises(ValueError):
            parse_baseline(bad)


class FakeRuns:
    """A store with only the one read find_baseline uses: runs in start order."""

    def __init__(self, runs: list[tuple[str, str, str]]) -> None:
        self.runs = runs  # (id, device, trigger), oldest first

    def baseline_run_id(self, run_id, trigger=None):
        ids = [r[0] for r in self.runs]
        device = self.runs[ids.index(run_id)][1]
        for rid, dev, trig in reversed(self.runs[:ids.index(run_id)]):
            if dev == device and (trigger is None or trig == trigger):
                return rid
        return None


def test_find_baseline_is_previous_run_of_same_trigger_and_device_never_itself():
    store = FakeRuns([("n1", "neuron", "nightly"), ("m1", "neuron", "manual"), ("c1", "cuda", "nightly"),
                      ("n2", "neuron", "nightly"), ("c2", "cuda", "nightly")])
    assert find_baseline(store, BaselineSpec(trigger="nightly"), "neuron", "n2") == "n1"
    assert find_baseline(store, BaselineSpec(), "neuron", "n2") == "m1"
    assert find_baseline(store, BaselineSpec(trigger="nightly"), "cuda", "c2") == "c1"
    assert find_baseline(store, BaselineSpec(trigger="nightly"), "neuron", "n1") is None
    assert find_baseline(store, BaselineSpec(run_id="n2"), "neuron", "n2") is None


def test_default_cron_fires_at_two_utc_only():
    sched = parse_cron("0 2 * * *")
    assert sched.minute == {0} and sched.hour == {2}
    # Last ran yesterday 02:00; at 01:59 UTC the next run is one minute away.
    sched.nowfun = lambda: datetime(2026, 5, 1, 1, 59, tzinfo=UTC)
    assert sched.remaining_estimate(datetime(2026, 4, 30, 2, 0, tzinfo=UTC)).total_seconds() == 60
    # Just ran at 02:00; at 02:01 the next run is tomorrow 02:00.
    sched.nowfun = lambda: datetime(2026, 5, 1, 2, 1, tzinfo=UTC)
    assert sched.remaining_estimate(datetime(2026, 5, 1, 2, 0, tzinfo=UTC)).total_seconds() == 24 * 3600 - 60


def test_beat_schedule_sends_the_nightly_task_on_the_queue_and_rejects_bad_cron():
    entry = beat_schedule("30 4 * * 1-5", "q1")["nightly-sweep"]
    assert entry["task"] == "compat.nightly_sweep" and entry["options"] == {"queue": "q1"}
    assert entry["schedule"].hour == {4} and entry["schedule"].day_of_week == {1, 2, 3, 4, 5}
    for bad in ("0 2 * *", "61 2 * * *", "0 25 * * *"):
        with pytest.raises(ValueError):
            parse_cron(bad)


class FakeRunStore(FakeRuns):
    def __init__(self, runs, results) -> None:
        super().__init__(runs)
        self.results = results

    def run_results(self, run_id):
        return self.results[run_id]

    def run_state(self, run_id):
        return "complete", len(self.results[run_id]), 0

    def selection(self, run_id):
        return None

    def determinants(self, run_id):
        return None  # recorded nothing: nothing moved

    def rerun_id(self, run_id):
        return None  # no flake-guard re-run: every regression counts


def test_regression_gate_exit_code():
    ok = [rec("A", Check.LOAD, Status.PASS)]
    bad = [rec("A", Check.LOAD, Status.ERROR)]
    store = FakeRunStore([("n1", "neuron", "nightly"), ("m1", "neuron", "manual"), ("n2", "neuron", "nightly")],
                         {"n1": ok, "m1": bad, "n2": bad})
    verdict = regression_gate(store, "n2", "neuron", "last-nightly", fail_on_regression=True)
    assert verdict.code == 1 and "run n2 vs baseline n1: 1 regression(s)" in verdict.lines[0]
    assert regression_gate(store, "n2", "neuron", "last-nightly", fail_on_regression=False).code == 0
    # Against the last run of any trigger (m1, already failing) nothing regressed.
    assert regression_gate(store, "n2", "neuron", "last", fail_on_regression=True).code == 0
    # The first nightly has no baseline: nothing to regress from.
    assert regression_gate(store, "n1", "neuron", "last-nightly", fail_on_regression=True).code == 0
