"""Per-architecture overrides applied after the generic shrink, where the generic rules are not enough.

Keyed by model_type (or class name); values are config fields to set, dotted for sub-configs ("text_config.x").
"""

from __future__ import annotations

import copy
from typing import Any

# Each entry says why the generic rule fails for it.
OVERRIDES: dict[str, dict[str, Any]] = {}


def apply_override(d: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``d`` with the override's fields set (dotted keys reach into sub-config dicts)."""
    out = copy.deepcopy(d)
    for key, value in override.items():
        target = out
        *path, leaf = key.split(".")
        for part in path:
            target = target.setdefault(part, {})
        target[leaf] = value
    return out
