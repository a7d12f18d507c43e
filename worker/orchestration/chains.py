"""Measures blocker chains after a sweep on the simulated device: each architecture that failed at an op runs again
with that op moved to the CPU fallback, and again with the next, until it passes or meets a failure that is not an op.

Like the decisions phase (decisions.py): the re-runs are tasks of one worker pool (worker/orchestration/variants.py;
the decisions' pool when the CLI shares it), each setting ``NEURON_CPU_OPS`` (the device's harness-only knob,
neuron_backend/config.py) in its worker for that task, and they reuse the CPU reference cache. Bounded: only
architectures failing at an op, at most ``compat.chains.MAX_LINKS`` ops each; every open chain of a step runs side by
side. A device that cannot move an op (a real one, ``cpu``) measures nothing: its chains stay at the first blocker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from compat.chains import Chain, ChainEnd, chains_of, extend
from compat.results import SUPPORT_CHECKS, Report
from worker.orchestration.sweep import write_report
from worker.orchestration.variants import VariantRunner, VariantTask
from worker.run.process.devices import Device

Progress = Callable[[str, int, int], None]  # (what is measured, done, total)


def can_move_ops(device: Device) -> bool:
    """Whether the device can be told to run a chosen op on the CPU fallback (the simulated neuron device)."""
    return device.info.simulated and getattr(device.backend, "set_cpu_ops", None) is not None


def measure(report: Report, device: Device, *, jobs: int, progress: Progress | None = None,
            runner: VariantRunner | None = None) -> list[Chain]:
    """Every chain of ``report``'s architectures that failed at an op; [] where the device cannot move ops.
    ``runner``: a pool shared with other phases (the decisions'); else one of its own for every step."""
    if not can_move_ops(device):
        return []
    records = [r for r in report.results if r.check in SUPPORT_CHECKS]
    entries = {e.name: e for e in report.architectures if not e.remote_code}
    chains = {c.architecture: c for c in chains_of(records, None)[0] if c.architecture in entries}
    total = len(chains)
    own = runner is None
    vr = VariantRunner(device, jobs) if runner is None else runner
    try:
        while open_ := [c for c in chains.values() if c.end == ChainEnd.UNKNOWN]:
            # One step: every open chain re-run with its ops so far on the CPU fallback, all as tasks of one pool
            # (architectures moving different ops side by side). Each chain depends only on its own re-runs.
            tasks = [VariantTask(c.architecture, entries[c.architecture], cpu_ops=tuple(c.ops))
                     for c in sorted(open_, key=lambda c: c.architecture)]

            def step(key: str, _done: int, _total: int) -> None:
                if progress:
                    closed = sum(1 for c in chains.values() if c.end != ChainEnd.UNKNOWN)
                    progress(f"{key}: {' + '.join(chains[key].ops)} on the CPU", closed, total)

            got = vr.run(tasks, SUPPORT_CHECKS, progress=step)
            for task in tasks:
                chains[task.key] = extend(chains[task.key], got.get(task.key, []))
    finally:
        if own:
            vr.close()
    if progress:
        progress("done", total, total)
    return sorted(chains.values(), key=lambda c: c.architecture)


def record(report: Report, device: Device, *, jobs: int, store: Any | None, json_path: Path | None,
           progress: Progress | None = None, runner: VariantRunner | None = None) -> list[Chain]:
    """Measure ``report``'s chains and keep them with the run: on the report, in the store, in the JSON file."""
    chains = measure(report, device, jobs=jobs, progress=progress, runner=runner)
    report.chains = [c.model_dump(mode="json") for c in chains]
    if store is not None and chains:
        store.set_chains(report.run.id, chains)
    if json_path is not None:
        write_report(report, json_path)
    return chains
