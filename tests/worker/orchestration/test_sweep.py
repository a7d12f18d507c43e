"""A real small sweep through the process pool: cpu self-check, neuron, a device OOM; store, JSON and traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Check, ResultRecord, Status
from service.store import Store
from worker.catalog.load import load_catalog
from worker.orchestration.sweep import abort_records, run_sweep
from worker.run.process.devices import resolve_device
from worker.run.process.pool import Outcome, Task

SMALL = ("LlamaForCausalLM", "GPT2LMHeadModel", "MambaForCausalLM")
REPORT_KEYS = {"architecture", "rank", "device", "check", "status", "metrics", "blocking_op", "error", "duration_s",
               "peak_mem_mb", "repro"}


def entries(*names: str) -> list[ArchitectureEntry]:
    by = {e.name: e for e in load_catalog("registry").entries}
    return [by[n] for n in names]


REMOTE = ArchitectureEntry(name="SomeRemoteForCausalLM", model_type="someremote", rank=999, remote_code=True)


class RecordingStore(Store):
    """The real store, noting each write of results and when each architecture ended."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.events: list[tuple[str, ...]] = []

    def add_results(self, run_id: str, records: list[ResultRecord]) -> None:
        super().add_results(run_id, records)
        self.events += [("write", r.architecture, str(r.check)) for r in records]


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("cpu")
    store = RecordingStore(f"sqlite:///{tmp}/compat.db")
    seen: list[str] = []

    def progress(e: ArchitectureEntry, recs: list[ResultRecord]) -> None:
        seen.append(e.name)
        store.events.append(("done", e.name))

    report = run_sweep([*entries(*SMALL), REMOTE], resolve_device("cpu"), DEFAULT_CHECKS, jobs=2, store=store,
                       json_path=tmp / "report.json", progress=progress)
    return report, store, tmp / "report.json", seen


def test_cpu_self_check_passes_every_buildable_architecture(cpu_run) -> None:
    report, _, _, seen = cpu_run
    by_arch: dict[str, dict[Check, Status]] = {}
    for r in report.results:
        by_arch.setdefault(r.architecture, {})[r.check] = r.status
    for name in SMALL:
        assert by_arch[name] == {c: Status.PASS for c in DEFAULT_CHECKS}, name
    assert set(by_arch[REMOTE.name].values()) == {Status.SKIPPED}
    assert sorted(seen) == sorted([*SMALL, REMOTE.name])  # progress once per architecture


def test_json_report_is_versioned_and_complete(cpu_run) -> None:
    report, _, path, _ = cpu_run
    data = json.loads(path.read_text())
    assert data["version"] == 1
    run = data["run"]
    assert run["device"]["name"] == "cpu" and run["versions"]["torch"] and run["finished"]
    assert run["catalog_source"] == "registry"
    assert len(data["results"]) == 4 * (len(SMALL) + 1)
    for res in data["results"]:
        assert REPORT_KEYS <= set(res)
    fwd = next(r for r in data["results"] if r["architecture"] == "LlamaForCausalLM" and r["check"] == "forward")
    assert fwd["metrics"]["cosine"] > 0.9999 and fwd["duration_s"] > 0


def test_store_has_results_traces_and_logs(cpu_run) -> None:
    report, store, _, _ = cpu_run
    stored = store.run_results(report.run.id)
    assert len(stored) == len(report.results)
    traces = {t.architecture: t.ops for t in store.op_traces(report.run.id)}
    assert set(traces) == set(SMALL)
    # forward + generate + train on the reference: matmuls and backward ops with dtypes.
    assert any(op.startswith("aten::") and "(Float)" in op for op in traces["LlamaForCausalLM"])
    assert any("backward" in op for op in traces["LlamaForCausalLM"])
    first = next(r for r in report.results if r.architecture == "MambaForCausalLM" and r.check == Check.LOAD)
    assert first.log is not None  # the captured log travels with the architecture's results


def test_each_record_is_stored_once_as_it_is_judged_with_its_part_of_the_log(cpu_run) -> None:
    report, store, _, _ = cpu_run
    writes = [ev[1:] for ev in store.events if ev[0] == "write"]
    assert sorted(writes) == sorted({(r.architecture, str(r.check)) for r in report.results})  # once per row
    for name in SMALL:
        # Streamed: every check's row is in the store before its architecture ends (a sweep killed mid-
        # architecture keeps them), in the order the checks ran.
        done_at = store.events.index(("done", name))
        mine = [i for i, ev in enumerate(store.events) if ev[:2] == ("write", name)]
        assert len(mine) == 4 and max(mine) < done_at
        assert [store.events[i][2] for i in mine] == ["load", "forward", "generate", "train"]
        logs = {str(r.check): r.log or "" for r in store.run_results(report.run.id) if r.architecture == name}
        # Each row carries the output of its own check: the phase line, then its verdict.
        assert f"{name} on cpu: build" in logs["load"] and "[compat] load: pass" in logs["load"]
        for check in ("forward", "generate", "train"):
            assert f"{name} on cpu: {check}" in logs[check] and f"[compat] {check}: pass" in logs[check]
            assert "[compat] load: pass" not in logs[check]


def test_neuron_sweep_attributes_failures(tmp_path: Path) -> None:
    report = run_sweep(entries("LlamaForCausalLM", "Qwen3MoeForCausalLM"), resolve_device("neuron"), DEFAULT_CHECKS, jobs=2,
                       json_path=tmp_path / "r.json")
    assert report.run.device.simulated and report.run.device.name == "neuron"
    recs = {(r.architecture, r.check): r for r in report.results}
    assert recs[("LlamaForCausalLM", Check.LOAD)].status == Status.PASS
    assert recs[("LlamaForCausalLM", Check.GENERATE)].status == Status.PASS
    for r in report.results:
        assert r.status != Status.REFERENCE_FAIL, r  # the harness itself never fails on these
        if r.status in (Status.UNSUPPORTED_OP, Status.UNSUPPORTED_DTYPE):
            assert r.blocking_op and r.blocking_op.startswith("aten::"), r
            assert r.repro == f"compat repro {r.architecture} --device neuron --check {r.check}"


def test_device_oom_is_recorded_and_later_checks_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A 0.5 MB NeuronCore cannot hold even the tiny model: load must be oom, the rest skipped, nothing lost.
    monkeypatch.setenv("NEURON_MEMORY_GB", "0.0005")
    report = run_sweep(entries("LlamaForCausalLM"), resolve_device("neuron"), DEFAULT_CHECKS, jobs=1)
    status = {r.check: r for r in report.results}
    assert status[Check.LOAD].status == Status.OOM
    assert status[Check.LOAD].error and "OutOfMemoryError" in status[Check.LOAD].error.type
    assert {status[c].status for c in (Check.FORWARD, Check.GENERATE, Check.TRAIN)} == {Status.SKIPPED}


def test_abort_records_blame_the_running_check_only() -> None:
    e = entries("LlamaForCausalLM")[0]
    order = list(DEFAULT_CHECKS)
    out = Outcome(Task("x", "m:f"), "crash", error="worker exited with signal SIGKILL", exitcode=-9,
                  duration_s=3.0)
    recs = abort_records(e, "neuron", order, {Check.LOAD}, "forward", out)
    assert [(str(r.check), str(r.status)) for r in recs] == [("forward", "crash"), ("generate", "skipped"),
                                                            ("train", "skipped")]
    assert recs[0].metrics["exitcode"] == -9 and recs[0].repro
    t = Outcome(Task("x", "m:f"), "timeout", error="time limit 300 s exceeded")
    assert {r.status for r in abort_records(e, "neuron", order, set(), "reference", t)} == {Status.REFERENCE_FAIL}
    m = Outcome(Task("x", "m:f"), "memory", error="memory limit 6144 MB exceeded")
    assert abort_records(e, "cpu", order, set(), "load", m)[0].status == Status.OOM


def test_cpu_fallback_pass_is_recorded_with_its_fallen_back_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    # Greedy generate calls aten::argmax, without a Neuron implementation in trn2: with NEURON_CPU_FALLBACK=1
    # (read by the pool worker at import) it runs on the CPU and the pass must say so.
    from compat.results import arch_verdict

    monkeypatch.setenv("NEURON_CPU_FALLBACK", "1")
    report = run_sweep(entries("ProphetNetForCausalLM"), resolve_device("neuron"), [Check.LOAD, Check.FORWARD, Check.GENERATE],
                       jobs=1)
    gen = next(r for r in report.results if r.check == Check.GENERATE)
    assert gen.status == Status.PASS and "aten::argmax (Float)" in gen.fallback_ops
    assert arch_verdict(report.results) == "supported_with_fallback"
