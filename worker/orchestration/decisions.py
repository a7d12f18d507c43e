"""Measures a finished run's uncertainty: for each decision switch of the device (and the range's two ends, every
switch that lets more run at once and every one that lets less), how many architectures it moves.

Measured, not guessed: the architectures whose support checks a switch can change (compat/decision_work.py) run again
with the other option, each re-run once however many plans read it, as tasks of one pool (worker/orchestration/
variants.py: each task sets ``NEURON_SWITCHES`` in its worker); the rest keep their stored records, and a switch that
only moves an op between the device and the CPU fallback is re-judged from the stored fallback ops (no run needed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat.decision_work import Need, PlanWork, distinct_reruns, needs
from compat.decisions import DecisionEffect, effect_of, rejudge_fallback
from compat.results import (
    SUPPORT_CHECKS,
    ArchitectureEntry,
    Report,
    ResultRecord,
    arch_verdict,
    by_architecture,
)
from worker.orchestration.sweep import write_report
from worker.orchestration.variants import VariantRunner, VariantTask
from worker.run.process.devices import Device
from worker.run.process.environ import environ_set

ENV = "NEURON_SWITCHES"
Progress = Callable[[str, int, int], None]  # (the re-run, done, total)


def device_switches(device: Device) -> list[dict[str, Any]]:
    """The device's decision switches (the simulated neuron device's profile has them; other devices none)."""
    fn = getattr(device.backend, "switches", None) if device.info.simulated else None
    return list(fn()) if fn is not None else []


def other_option(switch: dict[str, Any]) -> str:
    return next(name for name in switch["options"] if name != switch["default"])


def plans(switches: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What to measure: each switch alone at its other option, then all the permissive ones together and all the
    strict ones together (when there are two or more: a failure behind another failure moves only with both)."""
    out = [{sw["id"]: other_option(sw)} for sw in switches]
    for kind in ("permissive", "strict"):
        group = {sw["id"]: other_option(sw) for sw in switches if sw["other_option"] == kind}
        if len(group) > 1:
            out.append(group)
    return out


@contextmanager
def switched(device: Device, chosen: dict[str, str]) -> Iterator[None]:
    """Run the block with ``chosen`` switches set: in the environment (pool workers spawned inside inherit it) and in
    this process (``--jobs 0``); both are put back afterwards."""
    setter = getattr(device.backend, "set_switches", None)
    with environ_set(ENV, ",".join(f"{k}={v}" for k, v in sorted(chosen.items()))):
        if setter is not None:
            setter(chosen)
        try:
            yield
        finally:
            if setter is not None:
                setter({})


@dataclass
class Work:
    """What measuring a run's decisions takes: each plan's work (compat.decision_work) and the distinct re-runs."""

    switches: dict[str, dict[str, Any]]
    plans: list[PlanWork]
    reruns: list[Need]
    records: dict[str, list[ResultRecord]]  # the run's support records per architecture
    base: dict[str, str]  # the run's verdict per architecture
    entries: dict[str, ArchitectureEntry]

    def tasks(self) -> list[VariantTask]:
        return [VariantTask(_key(n), self.entries[n.architecture], switches=n.chosen) for n in self.reruns]


def _key(need: Need) -> str:
    return f"{need.architecture} with {', '.join(f'{k}={v}' for k, v in need.switches)}"


def prepare(report: Report, device: Device) -> Work | None:
    """The re-runs ``report``'s decisions need; None when nothing is measured (no switches, or the run's own
    switches are not at their defaults: its baseline is not the profile's)."""
    switches = device_switches(device)
    if not switches or any(sw["active"] != sw["default"] for sw in switches):
        return None
    by_id = {sw["id"]: sw for sw in switches}
    records = [r for r in report.results if r.check in SUPPORT_CHECKS]
    traces = {t.architecture: t.ops for t in report.op_traces}
    support = {t.architecture: t.support_ops for t in report.op_traces}
    by_arch = by_architecture(records)
    entries = {e.name: e for e in report.architectures if not e.remote_code}
    work = needs(plans(switches), by_id, traces, support, records, entries)
    return Work(by_id, work, distinct_reruns(work), by_arch,
                {arch: arch_verdict(recs) for arch, recs in by_arch.items()}, entries)


def measure(report: Report, device: Device, *, jobs: int, progress: Progress | None = None,
            runner: VariantRunner | None = None) -> list[DecisionEffect]:
    """Every plan's effect on ``report``'s verdicts, from the re-runs a switch can change (``runner``: a pool
    shared with other phases; else one of its own). The run's own switches must be at their defaults."""
    work = prepare(report, device)
    if work is None:
        return []
    tasks = work.tasks()
    own = runner is None
    vr = VariantRunner(device, jobs) if runner is None else runner
    try:
        got = vr.run(tasks, SUPPORT_CHECKS, progress=progress)
    finally:
        if own:
            vr.close()
    if progress:
        progress("done", len(tasks), len(tasks))
    effects = []
    for w in work.plans:
        chosen = [work.switches[sid] for sid in w.plan]
        fallback_only = [work.switches[sid] for sid in w.traces_switches]
        under: dict[str, str] = {}
        for arch in w.looked:
            # A re-run where one can change it, else the stored records; either re-judged for the plan's
            # fallback-only switches (their op moves between the device and the CPU fallback, nothing else).
            recs = got[_key(w.reruns[arch])] if arch in w.reruns else work.records.get(arch, [])
            under.update(rejudge_fallback(fallback_only, recs))
        subject = " + ".join(sw["subject"] for sw in chosen)
        confidence = min((sw["confidence"] for sw in chosen), key=["low", "medium", "high"].index)
        sources = [ref for sw in chosen for ref in sw["options"][w.plan[sw["id"]]]["sources"]]
        effects.append(effect_of(w.plan, subject, confidence, sources, w.measured_by, work.base, under, w.looked))
    return effects


def record(report: Report, device: Device, *, jobs: int, store: Any | None, json_path: Path | None,
           progress: Progress | None = None, runner: VariantRunner | None = None) -> list[DecisionEffect]:
    """Measure ``report``'s decisions and keep them with the run: on the report, in the store, in the JSON file."""
    effects = measure(report, device, jobs=jobs, progress=progress, runner=runner)
    report.decisions = [e.model_dump() for e in effects]
    if store is not None and effects:
        store.set_decisions(report.run.id, effects)
    if json_path is not None:
        write_report(report, json_path)
    return effects
