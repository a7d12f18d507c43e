"""``run_variant``: one architecture run with some of the simulated device's settings changed for that run only (the
decision switches, ``NEURON_SWITCHES``; the ops moved to the CPU fallback, ``NEURON_CPU_OPS``), in a warm worker;
``run_variants``: several such variants of one architecture over one build and one CPU reference.

The decisions and blocker-chain phases re-run architectures under such variants. Set per task, in the worker (the
device's own setters, which clear its decision cache, and the environment a child process would inherit), and put
back after it, so one pool serves every variant of a phase instead of a fresh pool per variant.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any

from compat.results import ArchitectureEntry, Check, ResultRecord
from worker.run.process.by_name import resolve
from worker.run.process.devices import Device, process_device
from worker.run.process.environ import environ_set
from worker.run.runner.reproducers import ReproFn, repro_command
from worker.run.runner.runner import Emit, run_architecture

SWITCHES_ENV = "NEURON_SWITCHES"  # neuron_backend/config.py: the start value of the profile's switches
CPU_OPS_ENV = "NEURON_CPU_OPS"  # neuron_backend/config.py: the harness-only knob the blocker chains use


@contextmanager
def variant(device: Device, switches: Mapping[str, str] | None = None, cpu_ops: Iterable[str] | None = None
            ) -> Iterator[None]:
    """Inside the block, ``switches`` (id -> option) and ``cpu_ops`` are in force on ``device`` (in this process
    and in the environment its children inherit); afterwards what the environment said before is back. Either left
    None is not touched."""
    backend = device.backend
    with ExitStack() as stack:
        if switches is not None:
            before = os.environ.get(SWITCHES_ENV, "")
            stack.enter_context(environ_set(SWITCHES_ENV, ",".join(f"{k}={v}" for k, v in sorted(switches.items()))))
            backend.set_switches(dict(switches))
            # The device's own parsers of its settings (neuron_backend hardware.profiles.parse_switches,
            # config.parse_cpu_ops), reached through the loaded backend: importing neuron_backend here would register
            # the device in any process.
            stack.callback(lambda: backend.set_switches(dict(backend.hardware.profiles.parse_switches(before))))
        if cpu_ops is not None:
            ops = sorted(set(cpu_ops))
            before_ops = os.environ.get(CPU_OPS_ENV, "")
            stack.enter_context(environ_set(CPU_OPS_ENV, ",".join(ops)))
            backend.set_cpu_ops(set(ops))
            stack.callback(lambda: backend.set_cpu_ops(backend.config.parse_cpu_ops(before_ops)))
        yield


# (key, switches, cpu_ops): one variant of ``run_variants``, either setting left None.
Variant = tuple[str, Mapping[str, str] | None, tuple[str, ...] | None]


def run_variants(entry: ArchitectureEntry, device: Device | str, checks: Iterable[Check | str],
                 variants: Sequence[Variant], *, seed: int = 0, emit: Emit | None = None,
                 repro: ReproFn = repro_command, hook: str = "") -> dict[str, list[ResultRecord]]:
    """Several variants of one architecture in one task: one build and one CPU reference (neither depends on the
    device's settings), then the checks once per variant with its settings in force; key -> its records.
    ``emit("setting", key)`` comes before each variant's records. A ``hook`` stand-in runs each variant alone."""
    dev = process_device(device) if isinstance(device, str) else device
    checks = list(checks)
    if hook:
        out = {}
        for key, switches, cpu_ops in variants:
            if emit is not None:
                emit("setting", key)
            out[key] = run_variant(entry, dev, checks, seed=seed, emit=emit, switches=switches, cpu_ops=cpu_ops,
                                   hook=hook)
        return out
    got: dict[str, list[ResultRecord]] = {key: [] for key, _, _ in variants}
    at = ""

    def collect(kind: str, payload: Any) -> None:
        nonlocal at
        if kind == "setting":
            at = payload
        elif kind == "record":
            got[at].append(payload)
        if emit is not None:
            emit(kind, payload)

    settings = [(key, partial(variant, dev, switches, cpu_ops)) for key, switches, cpu_ops in variants]
    run_architecture(entry, dev, checks, seed=seed, emit=collect, repro=repro, settings=settings)
    return got


def run_variant(entry: ArchitectureEntry, device: Device | str, checks: Iterable[Check | str], *, seed: int = 0,
                emit: Emit | None = None, repro: ReproFn = repro_command, switches: Mapping[str, str] | None = None,
                cpu_ops: Iterable[str] | None = None, hook: str = "") -> list[ResultRecord]:
    """``run_architecture`` with ``switches`` and ``cpu_ops`` in force for this one run (a pool task: the device
    arrives by name; in-process, as the ``Device``). ``hook``: a ``COMPAT_RUN_HOOK`` stand-in ("module:function",
    ``run_on``'s signature) to call instead of the real runner."""
    dev = process_device(device) if isinstance(device, str) else device
    with variant(dev, switches, cpu_ops):
        if hook:
            return resolve(hook)(entry, dev.name, list(checks), seed=seed, emit=emit)
        return run_architecture(entry, dev, checks, seed=seed, emit=emit, repro=repro)
