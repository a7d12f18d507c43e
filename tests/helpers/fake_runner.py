"""A stand-in for worker.run.runner.runner.run_on (COMPAT_RUN_HOOK=fake_runner:run) whose verdicts come from a JSON plan.

FAKE_RUNNER_PLAN names a file {"marker_dir": ..., "archs": {name: {"sleep_s": s, "<check>": [status, op, fallback]}}}
(fallback: the ops the check ran on the CPU, optional); a check not named passes. ``"once": {"<check>": [...]}``
applies only to the architecture's first execution in ``marker_dir`` (a failure that passes when run again: the
flake guard's case). Records stream through ``emit`` as the real runner's do, so the sweep stores each one as it is
judged. Every execution leaves a marker file ``<arch>.<pid>.<execution>`` the test can count. No torch.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from compat.results import ArchitectureEntry, Check, ResultRecord, Status


def write_plan(path: Path, marker_dir: Path, archs: dict[str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"marker_dir": str(marker_dir), "archs": archs}))
    return path


def executions(marker_dir: Path, arch: str) -> int:
    return len(list(marker_dir.glob(f"{arch}.*")))


def run(entry: ArchitectureEntry, device: str, checks: list[Check], *, seed: int = 0, workdir: Path | None = None,
        emit: Any = None) -> list[ResultRecord]:
    plan = json.loads(Path(os.environ["FAKE_RUNNER_PLAN"]).read_text())
    spec = plan.get("archs", {}).get(entry.name, {})
    execution = uuid.uuid4().hex[:8]
    markers = Path(plan["marker_dir"])
    markers.mkdir(parents=True, exist_ok=True)
    first = executions(markers, entry.name) == 0
    (markers / f"{entry.name}.{os.getpid()}.{execution}").write_text(str(os.getpid()))
    time.sleep(float(spec.get("sleep_s", 0.0)))
    out = []
    for c in checks:
        status, op, *fallback = (spec.get("once", {}) if first else {}).get(str(c)) or spec.get(str(c), ["pass", None])
        rec = ResultRecord(architecture=entry.name, rank=entry.rank, device=device, check=Check(c),
                           status=Status(status), blocking_op=op, fallback_ops=fallback[0] if fallback else [],
                           metrics={"execution": execution,
                                    "cpu_fallback_env": os.environ.get("NEURON_CPU_FALLBACK")})
        if emit is not None:
            emit("record", rec)
        out.append(rec)
    return out
