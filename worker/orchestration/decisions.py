"""Measures a finished run's uncertainty: for each decision switch of the device (and the range's two ends, every
switch that lets more run at once and every one that lets less), how many architectures it moves.

Measured, not guessed: the architectures a switch can touch (compat.decisions.affected) run again with the other
option, in the sweep's isolated workers, which inherit ``NEURON_SWITCHES``; a switch that only moves an op between
the device and the CPU fallback is re-judged from the stored fallback ops instead (no run needed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from compat.decisions import DecisionEffect, affected, effect_of, rejudge_fallback
from compat.results import SUPPORT_CHECKS, Report, Scope, arch_verdict, by_architecture
from worker.orchestration.sweep import run_sweep, write_report
from worker.run.process.devices import Device
from worker.run.process.environ import environ_set

ENV = "NEURON_SWITCHES"
Progress = Callable[[str, int, int], None]  # (what is measured, done, total)


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


def measure(report: Report, device: Device, *, jobs: int, progress: Progress | None = None) -> list[DecisionEffect]:
    """Every plan's effect on ``report``'s verdicts. The run's own switches must be at their defaults (a run made
    with other options measures nothing: its baseline is not the profile's)."""
    switches = device_switches(device)
    if not switches or any(sw["active"] != sw["default"] for sw in switches):
        return []
    by_id = {sw["id"]: sw for sw in switches}
    records = [r for r in report.results if r.check in SUPPORT_CHECKS]
    traces = {t.architecture: t.ops for t in report.op_traces}
    base = {arch: arch_verdict(recs) for arch, recs in by_architecture(records).items()}
    entries = {e.name: e for e in report.architectures if not e.remote_code}
    effects = []
    todo = plans(switches)
    for i, plan in enumerate(todo):
        chosen = [by_id[sid] for sid in plan]
        by_rerun = [sw for sw in chosen if sw["measure"] == "rerun"]
        by_traces = [sw for sw in chosen if sw["measure"] == "traces"]
        rerun_looked = sorted({a for sw in by_rerun for a in affected(sw, traces, records) if a in entries})
        traces_looked = {a for sw in by_traces for a in affected(sw, traces, records) if a in entries}
        label = ", ".join(f"{k}={v}" for k, v in plan.items())
        if progress:
            progress(label, i, len(todo))
        under: dict[str, str] = {}
        if rerun_looked:
            # Every chosen switch is set for the re-run, the fallback-only ones too: their effect rides along.
            with switched(device, plan):
                rerun = run_sweep([entries[a] for a in rerun_looked], device, SUPPORT_CHECKS, jobs=jobs,
                                  scope=Scope.SELECTION)
            under.update({a: arch_verdict(recs) for a, recs in by_architecture(rerun.results).items()})
        # What only a fallback-only switch touches is re-judged from its stored fallback ops: no run needed (an
        # argmax switch touches nearly every architecture through generate, and re-running them all would be a
        # second sweep).
        rest = traces_looked - set(rerun_looked)
        if rest:
            under.update(rejudge_fallback(by_traces, [r for r in records if r.architecture in rest]))
        looked = sorted(set(rerun_looked) | traces_looked)
        measured_by = "rerun" if rerun_looked else "traces"
        subject = " + ".join(sw["subject"] for sw in chosen)
        confidence = min((sw["confidence"] for sw in chosen), key=["low", "medium", "high"].index)
        sources = [ref for sw in chosen for ref in sw["options"][plan[sw["id"]]]["sources"]]
        effects.append(effect_of(plan, subject, confidence, sources, measured_by, base, under, looked))
    if progress:
        progress("done", len(todo), len(todo))
    return effects


def record(report: Report, device: Device, *, jobs: int, store: Any | None, json_path: Path | None,
           progress: Progress | None = None) -> list[DecisionEffect]:
    """Measure ``report``'s decisions and keep them with the run: on the report, in the store, in the JSON file."""
    effects = measure(report, device, jobs=jobs, progress=progress)
    report.decisions = [e.model_dump() for e in effects]
    if store is not None and effects:
        store.set_decisions(report.run.id, effects)
    if json_path is not None:
        write_report(report, json_path)
    return effects
