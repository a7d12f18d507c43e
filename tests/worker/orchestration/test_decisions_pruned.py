"""Issue 35 item 4: the decisions phase re-runs only what a switch can change, and its effects are exactly those of the
full re-run it replaces (every architecture a switch's ops touch re-run under every setting, each setting a sweep of
its own). Real runner, simulated device: GPT-2 (argmax on the CPU fallback in generate; integer embedding backward
in train only) and Mixtral (integer sort behind ``_grouped_mm``: only the two together move it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.checks import DEFAULT_CHECKS
from compat.decisions import DecisionEffect, affected, effect_of, rejudge_fallback
from compat.results import SUPPORT_CHECKS, ArchitectureEntry, Report, Scope, arch_verdict, by_architecture
from compat.settings import get_settings
from worker.orchestration import decisions
from worker.orchestration.sweep import run_sweep
from worker.run.process.devices import Device, resolve_device

ARCHS = (("GPT2LMHeadModel", "gpt2"), ("MixtralForCausalLM", "mixtral"))


def full_rerun(report: Report, device: Device) -> list[DecisionEffect]:
    """The rule before issue 35, kept here as the oracle: per setting, every architecture a re-run switch of it
    touches (trace or support record) re-run with all of the setting's switches, in this process; the architectures
    only a fallback-only switch touches re-judged from their stored fallback ops."""
    switches = decisions.device_switches(device)
    by_id = {sw["id"]: sw for sw in switches}
    records = [r for r in report.results if r.check in SUPPORT_CHECKS]
    traces = {t.architecture: t.ops for t in report.op_traces}
    base = {a: arch_verdict(recs) for a, recs in by_architecture(records).items()}
    entries = {e.name: e for e in report.architectures}
    out = []
    for plan in decisions.plans(switches):
        chosen = [by_id[s] for s in plan]
        rerun_sw = [sw for sw in chosen if sw["measure"] == "rerun"]
        traces_sw = [sw for sw in chosen if sw["measure"] == "traces"]
        rerun_looked = sorted({a for sw in rerun_sw for a in affected(sw, traces, records)})
        traces_looked = {a for sw in traces_sw for a in affected(sw, traces, records)}
        under: dict[str, str] = {}
        if rerun_looked:
            with decisions.switched(device, plan):
                again = run_sweep([entries[a] for a in rerun_looked], device, SUPPORT_CHECKS, jobs=0,
                                  scope=Scope.SELECTION)
            under.update({a: arch_verdict(recs) for a, recs in by_architecture(again.results).items()})
        rest = traces_looked - set(rerun_looked)
        if rest:
            under.update(rejudge_fallback(traces_sw, [r for r in records if r.architecture in rest]))
        sources = [ref for sw in chosen for ref in sw["options"][plan[sw["id"]]]["sources"]]
        confidence = min((sw["confidence"] for sw in chosen), key=["low", "medium", "high"].index)
        out.append(effect_of(plan, " + ".join(sw["subject"] for sw in chosen), confidence, sources,
                             "rerun" if rerun_looked else "traces", base, under,
                             sorted(set(rerun_looked) | traces_looked)))
    return out


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COMPAT_VAR_DIR", str(tmp_path / "var"))
    # The CPU reference cache on, as in production (Settings.reference_cache defaults to on), in this test's own
    # folder: every re-run of an architecture (pruned or full) reads the references the first sweep stored instead of
    # recomputing them, and nothing another test stored can hit. tests/worker/run/reference/test_reference_cache.py
    # pins that verdicts do not depend on the cache.
    monkeypatch.setenv("COMPAT_REFERENCE_CACHE", "1")
    monkeypatch.setenv("COMPAT_REFERENCE_CACHE_DIR", str(tmp_path / "cache"))
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def test_pruned_decisions_equal_the_full_rerun_with_fewer_runs(settings) -> None:
    device = resolve_device("neuron")
    entries = [ArchitectureEntry(name=n, model_type=t, rank=i) for i, (n, t) in enumerate(ARCHS, 1)]
    # The sweep's default checks: train's trace holds integer embedding backward, which only train runs.
    report = run_sweep(entries, device, DEFAULT_CHECKS, jobs=0)
    assert all(t.support_ops is not None for t in report.op_traces), "the sweep records the support checks' ops"

    work = decisions.prepare(report, device)
    assert work is not None
    # A pool of one worker: every re-run goes through the same process, switches set and put back per task.
    pruned = decisions.measure(report, device, jobs=1)
    full = full_rerun(report, device)
    assert [e.model_dump() for e in pruned] == [e.model_dump() for e in full]

    effects = {e.key: e for e in pruned}
    permissive = next(e for e in pruned if len(e.switches) > 1 and "integer_sort_topk" in e.switches)
    assert permissive.gains == ["MixtralForCausalLM"]  # the case where the combination is not the union
    scatter = effects["integer_scatter_compute_eager=fails"]
    assert scatter.affected == ["GPT2LMHeadModel", "MixtralForCausalLM"] and scatter.moves == 0
    # What the full rule re-ran (each looked-at architecture per re-run setting) against the distinct re-runs now.
    full_runs = sum(len(e.affected) for e in full if e.measured_by == "rerun")
    reran = {(n.architecture, n.switches) for n in work.reruns}
    assert len(reran) == len(work.reruns) < full_runs
    assert all(n.architecture == "MixtralForCausalLM" for n in work.reruns), work.reruns  # GPT-2 needs none
    assert ("MixtralForCausalLM", (("grouped_mm_preconditions", "not_enforced"), ("integer_sort_topk", "runs"))) \
        in reran
