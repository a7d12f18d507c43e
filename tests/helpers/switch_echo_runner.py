"""A stand-in for worker.run.runner.runner.run_on (``COMPAT_RUN_HOOK=switch_echo_runner:run``): every check passes
and its record carries the device switches in force (``NEURON_SWITCHES``) and the worker's pid; with
``complex_eager=raises`` in force the worker dies in the load check. For tests of how re-runs are grouped; no torch."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from compat.results import ArchitectureEntry, Check, ResultRecord, Status


def run(entry: ArchitectureEntry, device: str, checks: list[Check], *, seed: int = 0,
        workdir: Path | None = None, emit: Any = None) -> list[ResultRecord]:
    switches = os.environ.get("NEURON_SWITCHES", "")
    recs = []
    for c in checks:
        if emit is not None:
            emit("phase", str(c))
        if "complex_eager=raises" in switches:
            os.kill(os.getpid(), signal.SIGKILL)
        rec = ResultRecord(architecture=entry.name, device=device, check=c, status=Status.PASS, reason=switches,
                           metrics={"pid": os.getpid()})
        if emit is not None:
            emit("record", rec)
        recs.append(rec)
    return recs
