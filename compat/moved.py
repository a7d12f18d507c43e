"""What determines a run's results, as one flat mapping, and what moved between a baseline and a run: every key
whose value differs, e.g. ``switch integer_sort_topk: runs -> fails`` or ``transformers 5.23.0 -> 5.24.0``.

The run records its determinants when it starts (``worker/run/process/determinants.py`` collects them); the diff shows what
moved above its regressions on the CLI, the API's diff and the run diff page (issue 34 item 2). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The libraries whose versions decide a result (the reference cache keys on the same ones: worker/run/reference/reference.py).
LIBRARIES = ("torch", "transformers", "peft", "trl", "accelerate")
SWITCH_PREFIX = "switch "
# Every fixed key a run records; a diff lists them in this order, with the switches ("switch <id>") before "mode".
KEYS = (*LIBRARIES, "device backend", "backend version", "profile", "profile digest", "mode", "harness")
KINDS = {**{k: "library" for k in LIBRARIES}, "device backend": "device", "backend version": "device",
         "profile": "profile", "profile digest": "profile", "mode": "mode", "harness": "harness"}
ABSENT = "(none)"


@dataclass(frozen=True)
class Moved:
    """One determinant that differs between the baseline and the run."""

    key: str  # "transformers", "switch integer_sort_topk", "mode", ...
    kind: str  # library | device | profile | switch | mode | harness | other
    before: str | None  # None: the baseline did not record it
    after: str | None

    def line(self) -> str:
        old, new = self.before or ABSENT, self.after or ABSENT
        if self.kind == "switch":
            return f"{self.key}: {old} -> {new}"
        return f"{self.key} {old} -> {new}"

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "before": self.before, "after": self.after, "line": self.line()}


def kind_of(key: str) -> str:
    return "switch" if key.startswith(SWITCH_PREFIX) else KINDS.get(key, "other")


_HEAD = (*LIBRARIES, "device backend", "backend version", "profile", "profile digest")
_TAIL = ("mode", "harness")


def _order(key: str) -> tuple[int, int, str]:
    if key in _HEAD:
        return (0, _HEAD.index(key), key)
    if key.startswith(SWITCH_PREFIX):
        return (1, 0, key)
    return (2, _TAIL.index(key), key) if key in _TAIL else (3, 0, key)


def what_moved(before: Mapping[str, str] | None, after: Mapping[str, str] | None) -> list[Moved]:
    """Every determinant whose value differs, in ``KEYS`` order (switches between the profile and the mode). A
    baseline that recorded nothing (stored before runs recorded determinants, or no baseline at all) moves nothing:
    an unknown is not a difference."""
    if not before or not after:
        return []
    keys = sorted(set(before) | set(after), key=_order)
    return [Moved(k, kind_of(k), before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]


def switch_key(switch_id: str) -> str:
    return f"{SWITCH_PREFIX}{switch_id}"
