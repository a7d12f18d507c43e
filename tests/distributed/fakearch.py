"""A stand-in for worker.run.runner.runner.run_on (COMPAT_RUN_HOOK=fakearch:run) whose behaviour is in the entry.

The Celery task path around it is the real one; only building and judging a model is replaced by a sleep,
a crash or a hang, so fault tests take seconds. Every execution leaves a marker file the test can observe.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from compat.results import ArchitectureEntry, Check, ResultRecord, Status


def behaviour_of(entry: ArchitectureEntry) -> dict[str, Any]:
    """From the entry's config (tests that build entries), else from the JSON file named by FAKEARCH_PLAN (tests
    that sweep real catalog entries through the CLI): {"marker_dir": ..., "archs": {name: {...}}}."""
    plan_file = os.environ.get("FAKEARCH_PLAN")
    if plan_file:
        plan = json.loads(Path(plan_file).read_text())
        return {"marker_dir": plan["marker_dir"], **plan.get("archs", {}).get(entry.name, {})}
    return entry.config or {}


def run(entry: ArchitectureEntry, device: str, checks: list[Check], *, seed: int = 0,
        workdir: Path | None = None, emit: Any = None) -> list[ResultRecord]:
    cfg = behaviour_of(entry)
    execution = uuid.uuid4().hex[:8]
    markers = Path(cfg["marker_dir"])
    markers.mkdir(parents=True, exist_ok=True)
    first = not any(markers.glob(f"{entry.name}.*"))
    (markers / f"{entry.name}.{os.getpid()}.{execution}").write_text(str(time.time()))
    behaviour = cfg.get("fake", "sleep")
    # Output from Python and from a raw descriptor write (what native code does): both must reach the stored log.
    print(f"fakearch: {entry.name} runs as {execution}", flush=True)
    os.write(2, f"fakearch: {entry.name} native stderr\n".encode())
    if behaviour == "crash" or (behaviour == "crash_once" and first):
        os.kill(os.getpid(), signal.SIGKILL)
    if behaviour == "hang":
        # A process stuck in native code never sees the soft limit; swallowing it models that.
        deadline = time.monotonic() + 3600
        while time.monotonic() < deadline:
            try:
                time.sleep(0.1)
            except BaseException:  # noqa: BLE001, S110 - deliberately deaf to SoftTimeLimitExceeded
                pass
    if behaviour == "hold":
        # Busy until the test opens the gate (a file): the test can kill this process while it provably runs
        # the architecture, however slowly the machine moves. The task's soft limit still bounds the wait.
        gate = Path(cfg["gate"])
        while not gate.exists():
            time.sleep(0.05)
    time.sleep(float(cfg.get("sleep_s", 0.0)))
    status = Status(cfg.get("status", "pass"))
    return [ResultRecord(architecture=entry.name, rank=entry.rank, device=device, check=c, status=status,
                         metrics={"pid": os.getpid(), "execution": execution}) for c in checks]

