"""Measures blocker chains after a sweep on the simulated device: each architecture that failed at an op runs again
with that op moved to the CPU fallback, and again with the next, until it passes or meets a failure that is not an op.

Like the decisions phase (decisions.py): the re-runs go through ``run_sweep`` in the sweep's isolated workers, which
inherit ``NEURON_CPU_OPS`` (the device's harness-only knob, neuron_backend/config.py) from this process, and reuse
the CPU reference cache. Bounded: only architectures failing at an op, at most ``compat.chains.MAX_LINKS`` ops each;
architectures moving the same ops share one re-run. A device that cannot move an op (a real one, ``cpu``) measures
nothing: its chains stay at the first blocker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from compat.chains import Chain, ChainEnd, chains_of, extend
from compat.results import SUPPORT_CHECKS, Report, Scope, by_architecture
from worker.orchestration.sweep import run_sweep, write_report
from worker.run.process.devices import Device
from worker.run.process.environ import environ_set

ENV = "NEURON_CPU_OPS"
Progress = Callable[[str, int, int], None]  # (what is measured, done, total)


def can_move_ops(device: Device) -> bool:
    """Whether the device can be told to run a chosen op on the CPU fallback (the simulated neuron device)."""
    return device.info.simulated and getattr(device.backend, "set_cpu_ops", None) is not None


@contextmanager
def moved(device: Device, ops: list[str]) -> Iterator[None]:
    """Run the block with ``ops`` on the CPU fallback: in the environment (pool workers spawned inside inherit it)
    and in this process (``--jobs 0``); both are put back afterwards."""
    with environ_set(ENV, ",".join(ops)):
        device.backend.set_cpu_ops(set(ops))
        try:
            yield
        finally:
            device.backend.set_cpu_ops(set())


def measure(report: Report, device: Device, *, jobs: int, progress: Progress | None = None) -> list[Chain]:
    """Every chain of ``report``'s architectures that failed at an op; [] where the device cannot move ops."""
    if not can_move_ops(device):
        return []
    records = [r for r in report.results if r.check in SUPPORT_CHECKS]
    entries = {e.name: e for e in report.architectures if not e.remote_code}
    chains = {c.architecture: c for c in chains_of(records, None)[0] if c.architecture in entries}
    total = len(chains)
    while open_ := [c for c in chains.values() if c.end == ChainEnd.UNKNOWN]:
        # Architectures whose chains so far hold the same ops share one re-run.
        groups: dict[tuple[str, ...], list[str]] = {}
        for c in open_:
            groups.setdefault(tuple(c.ops), []).append(c.architecture)
        for ops, archs in sorted(groups.items()):
            if progress:
                closed = sum(1 for c in chains.values() if c.end != ChainEnd.UNKNOWN)
                progress(f"{' + '.join(ops)} on the CPU ({len(archs)})", closed, total)
            with moved(device, list(ops)):
                rerun = run_sweep([entries[a] for a in archs], device, SUPPORT_CHECKS, jobs=jobs,
                                  scope=Scope.SELECTION)
            got = by_architecture(rerun.results)
            for a in archs:
                chains[a] = extend(chains[a], got.get(a, []))
    if progress:
        progress("done", total, total)
    return sorted(chains.values(), key=lambda c: c.architecture)


def record(report: Report, device: Device, *, jobs: int, store: Any | None, json_path: Path | None,
           progress: Progress | None = None) -> list[Chain]:
    """Measure ``report``'s chains and keep them with the run: on the report, in the store, in the JSON file."""
    chains = measure(report, device, jobs=jobs, progress=progress)
    report.chains = [c.model_dump(mode="json") for c in chains]
    if store is not None and chains:
        store.set_chains(report.run.id, chains)
    if json_path is not None:
        write_report(report, json_path)
    return chains
