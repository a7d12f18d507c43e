"""Re-runs of architectures under variants of the simulated device (decision switches, ops moved to the CPU fallback)
as tasks of one worker pool, shared by the decisions and blocker-chain phases; and where their time goes.

Each task sets its variant in the worker for that task only (``worker/run/runner/variant.py``), so the phases start
their workers once instead of once per variant, and a variant with one architecture does not leave a worker idle.
An architecture's variants go to one task: it is built and its CPU reference prepared once for all of them (neither
depends on the device's settings), each variant under the time limit of one run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

from compat.checks import RUN_ORDER
from compat.results import ArchitectureEntry, Check, ResultRecord
from compat.settings import get_settings
from worker.orchestration.executors import resolve_runner
from worker.orchestration.sweep import abort_records
from worker.orchestration.warm_pool import sweep_pool
from worker.run.process.devices import Device
from worker.run.process.pool import Pool, Task
from worker.run.runner.reproducers import repro_command

# Named, not imported: the runner (torch's checks, peft, trl) loads where the re-runs run, a pool worker, or this
# process when it runs them itself (jobs=0).
RUNNER = "worker.run.runner.variant:run_variants"
Progress = Callable[[str, int, int], None]  # (task key, done, total)


@dataclass(frozen=True)
class VariantTask:
    """One architecture run with ``switches`` (id -> option) and/or ``cpu_ops`` in force; ``key`` is unique."""

    key: str
    entry: ArchitectureEntry
    switches: Mapping[str, str] | None = None
    cpu_ops: tuple[str, ...] | None = None


@dataclass
class PhaseClock:
    """Where re-runs' time went: seconds summed over tasks per runner phase (build, reference, each check), the
    workers' start (spawn until imports done), dispatch (a task's time outside its phases), and the wall time."""

    phases: dict[str, float] = field(default_factory=dict)
    start_s: float = 0.0
    wall_s: float = 0.0
    tasks: int = 0

    def add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def since(self, before: PhaseClock) -> PhaseClock:
        """What was added after ``before`` (an earlier copy of this clock): one phase's share of a shared pool."""
        return PhaseClock({k: v - before.phases.get(k, 0.0) for k, v in self.phases.items()},
                          self.start_s - before.start_s, self.wall_s - before.wall_s, self.tasks - before.tasks)

    def text(self) -> str:
        """``12 re-runs, 20.1 s wall: worker start 6.2 s, build 3.0 s, reference 2.1 s, load 0.8 s, ...``
        (summed over the workers, so the parts can add up to more than the wall time)."""
        order = ["build", "reference", *(str(c) for c in RUN_ORDER), "other"]
        parts = [f"worker start {self.start_s:.1f} s"] + [
            f"{p} {self.phases[p]:.1f} s" for p in sorted(self.phases, key=lambda p: (
                order.index(p) if p in order else len(order), p))]
        return f"{self.tasks} re-run(s), {self.wall_s:.1f} s wall: " + ", ".join(parts)


class _Timer:
    """Per task: the phase it is in and since when; closed phases go to the clock."""

    def __init__(self, clock: PhaseClock) -> None:
        self.clock = clock
        self.open: dict[str, tuple[str, float]] = {}
        self.spent: dict[str, float] = {}

    def phase(self, key: str, name: str) -> None:
        self.close(key)
        self.open[key] = (name, time.monotonic())

    def close(self, key: str) -> None:
        if key in self.open:
            name, t0 = self.open.pop(key)
            took = time.monotonic() - t0
            self.clock.add(name, took)
            self.spent[key] = self.spent.get(key, 0.0) + took

    def done(self, key: str, duration_s: float | None) -> None:
        self.close(key)
        if duration_s is not None:
            self.clock.add("other", max(0.0, duration_s - self.spent.pop(key, 0.0)))


class VariantRunner:
    """``with VariantRunner(device, jobs) as vr: records = vr.run(tasks, checks)``: one pool for every ``run``
    (``pool``: the sweep's, still warm; else one started on the first run and closed on exit); ``jobs=0`` runs in
    this process. ``clock`` collects the time."""

    def __init__(self, device: Device, jobs: int, *, seed: int | None = None, pool: Pool | None = None) -> None:
        settings = get_settings()
        self.device, self.jobs = device, jobs
        self.seed = settings.seed if seed is None else seed
        self.hook = settings.run_hook
        self.clock = PhaseClock()
        self._pool: Pool | None = pool  # a caller's pool (the sweep's) is used, never closed, here
        self._own = pool is None
        self._start_before = pool.start_s if pool is not None else 0.0  # its workers' start: the sweep's time

    def __enter__(self) -> VariantRunner:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def clock_now(self) -> PhaseClock:
        """A copy of the clock so far, the live pool's worker starts included."""
        c = self.clock
        live = self._pool.start_s - self._start_before if self._pool is not None else 0.0
        return PhaseClock(dict(c.phases), c.start_s + live, c.wall_s, c.tasks)

    def close(self) -> None:
        if self._pool is not None:
            self.clock.start_s += self._pool.start_s - self._start_before
            if self._own:
                self._pool.close()
            self._pool = None

    def run(self, tasks: Sequence[VariantTask], checks: Sequence[Check | str], progress: Progress | None = None
            ) -> dict[str, list[ResultRecord]]:
        """Every task's records (task key -> records, in run order); a task whose worker died gets the records
        the sweep would give it (``abort_records``)."""
        order = [c for c in RUN_ORDER if c in {Check(c) for c in checks}]
        t0 = time.monotonic()
        got: dict[str, dict[Check, ResultRecord]] = {t.key: {} for t in tasks}
        timer = _Timer(self.clock)
        done = 0

        def finished(key: str) -> None:
            nonlocal done
            done += 1
            if progress:
                progress(key, done, len(tasks))

        if self.jobs == 0:
            for group in by_architecture(tasks):
                at = group[0].key

                def emit(kind: str, payload: Any) -> None:  # the records come back from run_variants, by variant
                    nonlocal at
                    if kind == "setting":
                        at = payload
                    elif kind == "phase":
                        timer.phase(at, payload)

                out = resolve_runner(RUNNER)(group[0].entry, self.device, order, [_variant(t) for t in group],
                                             seed=self.seed, emit=emit, hook=self.hook)
                for t in group:
                    for rec in out.get(t.key, []):
                        got[t.key].setdefault(rec.check, rec)
                    timer.done(t.key, None)
                    finished(t.key)
        elif tasks:
            self._run_pool(tasks, order, got, timer, finished)
        self.clock.tasks += len(tasks)
        self.clock.wall_s += time.monotonic() - t0
        return {k: sorted(v.values(), key=lambda r: RUN_ORDER.index(r.check)) for k, v in got.items()}

    def _run_pool(self, tasks: Sequence[VariantTask], order: list[Check], got: dict[str, dict[Check, ResultRecord]],
                  timer: _Timer, finished: Callable[[str], None]) -> None:
        if self._pool is None:
            self._pool = sweep_pool(self.device.name, self.jobs)
            self._own, self._start_before = True, 0.0
        by_key = {t.key: t for t in tasks}
        rounds = by_architecture(tasks)
        while rounds:
            rounds = self._run_round(rounds, by_key, order, got, timer, finished)

    def _run_round(self, groups: list[list[VariantTask]], by_key: Mapping[str, VariantTask], order: list[Check],
                   got: dict[str, dict[Check, ResultRecord]], timer: _Timer, finished: Callable[[str], None]
                   ) -> list[list[VariantTask]]:
        """One pool task per group (an architecture's variants); returns the variants a stopped worker never began,
        each to run again alone (what one task per variant would have done)."""
        assert self._pool is not None
        at: dict[str, str | None] = {}  # group task key -> the variant it is running
        began: dict[str, float] = {}  # variant key -> when it began
        phases: dict[str, str | None] = {}  # variant key (or group key before any variant) -> its phase
        members = {_group_key(g): g for g in groups}
        pool_tasks = [Task(key, RUNNER, (g[0].entry, self.device.name, order, [_variant(t) for t in g]),
                           {"seed": self.seed, "hook": self.hook}, stream=True, clock_on="setting")
                      for key, g in members.items()]
        again: list[list[VariantTask]] = []
        for ev in self._pool.run(pool_tasks):
            gkey = ev.task.key
            current = at.get(gkey)
            if ev.kind == "setting":
                if current is not None:
                    finished(current)  # its records are all in: the next variant began
                at[gkey], began[ev.payload] = ev.payload, time.monotonic()
            elif ev.kind == "phase":
                phases[current or gkey] = ev.payload
                timer.phase(gkey, ev.payload)
            elif ev.kind == "record" and current is not None:
                got[current][ev.payload.check] = ev.payload
            elif ev.done is not None:
                out = ev.done
                timer.done(gkey, out.duration_s)
                keys = [t.key for t in members[gkey]]
                if out.kind == "ok":
                    for key in keys:
                        for rec in out.value.get(key, []):
                            got[key].setdefault(rec.check, rec)
                    for key in keys[keys.index(current) if current else 0:]:
                        finished(key)  # the ones before it were finished as the next began
                    continue
                if current is None:  # stopped in the build or the CPU reference: every variant's outcome
                    stopped, rest = keys, []
                else:
                    stopped, rest = [current], keys[keys.index(current) + 1:]
                    out = replace(out, duration_s=time.monotonic() - began[current])
                for key in stopped:
                    for rec in abort_records(by_key[key].entry, self.device.name, order, set(got[key]),
                                             phases.get(current or gkey), out, repro_command):
                        got[key][rec.check] = rec
                    finished(key)
                again += [[by_key[k]] for k in rest]
        return again


def by_architecture(tasks: Sequence[VariantTask]) -> list[list[VariantTask]]:
    """The tasks grouped by architecture, in first-seen order: one pool task builds and references each once."""
    groups: dict[str, list[VariantTask]] = {}
    for t in tasks:
        groups.setdefault(t.entry.name, []).append(t)
    return list(groups.values())


def _group_key(group: Sequence[VariantTask]) -> str:
    return group[0].key if len(group) == 1 else f"{group[0].entry.name} ({len(group)} variants)"


def _variant(t: VariantTask) -> tuple[str, dict[str, str] | None, tuple[str, ...] | None]:
    """The task as ``run_variants`` takes one variant: (key, switches, cpu_ops)."""
    return (t.key, dict(t.switches) if t.switches is not None else None, t.cpu_ops)
