"""A stand-in for worker.run.runner.runner.run_on (``COMPAT_RUN_HOOK=passing_runner:passing``): every check passes, each
record streamed through ``emit`` as the real runner streams it. For tests of what happens around a run (its kind,
its label, its repro), not of a verdict; no torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compat.results import ArchitectureEntry, Check, ResultRecord, Status


def passing(entry: ArchitectureEntry, device: str, checks: list[Check], *, seed: int = 0,
            workdir: Path | None = None, emit: Any = None) -> list[ResultRecord]:
    recs = [ResultRecord(architecture=entry.name, device=device, check=c, status=Status.PASS) for c in checks]
    for r in recs:
        if emit is not None:
            emit("record", r)
    return recs
