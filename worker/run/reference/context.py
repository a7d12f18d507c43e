"""What every check of one architecture shares: its name and rank, the device, the CPU reference, the device model.

Its own module so the check modules (checks.py, finetune_checks.py) can both take it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from compat.results import Check
from worker.run.process.devices import Device
from worker.run.reference.reference import Reference


@dataclass
class CheckContext:
    architecture: str
    rank: int | None
    device: Device
    ref: Reference
    model: torch.nn.Module | None = None  # the device model, set by the load check
    checks: tuple[Check, ...] = ()  # every check requested for this architecture (the rank group runs them at once)
    cache: dict[str, Any] = field(default_factory=dict)  # results shared between checks (the rank group's run)
