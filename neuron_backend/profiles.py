"""Device profiles: the shipped JSON op tables (profiles/<name>.json) loaded and validated into a Profile.

A profile is data: native ops with their dtypes, forbidden dtypes, int64 handling, restrictions, each with its source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch

PROFILE_DIR = Path(__file__).with_name("profiles")


def available() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def _dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"profile names unknown dtype {name!r}")
    return dt


@dataclass(frozen=True)
class Restriction:
    kind: str  # data_dependent_shape | bool_index | dtype
    reason: str
    source: str
    dtypes: frozenset[torch.dtype] | None = None


@dataclass(frozen=True)
class Hardware:
    """One chip of the generation a profile models (cited in ``sources``)."""

    generation: str
    neuroncore: str
    cores_per_chip: int
    hbm_per_chip_bytes: int
    lnc_default: int
    sources: tuple[str, ...]


@dataclass(frozen=True)
class KnownIssue:
    """An op the release notes say fails at execution on the real device (for these dtypes / this precondition)."""

    op: str
    reason: str
    source: str
    dtypes: frozenset[torch.dtype] | None = None
    precondition: str | None = None
    confidence: str = "medium"


_NO_HARDWARE = Hardware("unknown", "unknown", 2, 32 << 30, 1, ())


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    confidence: str
    device_dtypes: frozenset[torch.dtype]
    forbidden: dict[torch.dtype, str]
    ops: dict[str, frozenset[torch.dtype]]
    views: frozenset[str]
    int64_ops: frozenset[str]
    host_sync_ops: frozenset[str]
    restrictions: dict[str, Restriction] = field(default_factory=dict)
    hardware: Hardware = _NO_HARDWARE
    input_autocast: dict[torch.dtype, torch.dtype] = field(default_factory=dict)
    rejected_dtypes: dict[torch.dtype, str] = field(default_factory=dict)
    kernel_failures: dict[str, KnownIssue] = field(default_factory=dict)
    matmul_autocast: str = "bf16"
    complex_decompose_default: bool = False
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    def native_dtypes(self, op: str) -> frozenset[torch.dtype] | None:
        """Dtypes an op runs natively with, or None; in-place variants (``add_``) follow their functional op."""
        found = self.ops.get(op)
        if found is None and op.endswith("_") and not op.endswith("__"):
            found = self.ops.get(op[:-1])
        return found


def _parse(raw: dict) -> Profile:
    dt = raw["dtypes"]
    groups = {g: frozenset(_dtype(n) for n in names) for g, names in dt["groups"].items()}
    ops = {}
    for op, group in raw["ops"].items():
        if not op.startswith("aten::") or group not in groups:
            raise ValueError(f"profile {raw['name']}: bad entry {op!r}: {group!r}")
        ops[op] = groups[group]
    restrictions = {}
    for r in raw.get("restrictions", []):
        for op in r["ops"]:
            restrictions[op] = Restriction(
                kind=r["kind"], reason=r["reason"], source=r["source"],
                dtypes=groups[r["dtypes"]] if "dtypes" in r else None,
            )
    return Profile(
        name=raw["name"],
        summary=raw["summary"],
        confidence=raw["confidence"],
        device_dtypes=frozenset(_dtype(n) for n in dt["device"]),
        forbidden={_dtype(n): src for n, src in dt["forbidden"].items()},
        ops=ops,
        views=frozenset(raw["views_and_memory"]["ops"]),
        int64_ops=frozenset(raw["int64"]["ops"]),
        host_sync_ops=frozenset(raw["host_sync"]["ops"]),
        restrictions=restrictions,
        hardware=Hardware(**{**raw["hardware"], "sources": tuple(raw["hardware"]["sources"])})
        if "hardware" in raw else _NO_HARDWARE,
        input_autocast={_dtype(a): _dtype(b) for a, b in raw.get("input_autocast", {}).get("casts", {}).items()},
        rejected_dtypes={_dtype(n): why for n, why in raw.get("rejected_dtypes", {}).items()},
        kernel_failures={
            k["op"]: KnownIssue(op=k["op"], reason=k["reason"], source=k["source"],
                                dtypes=frozenset(_dtype(n) for n in k["dtypes"]) if k.get("dtypes") else None,
                                precondition=k.get("precondition"), confidence=k.get("confidence", "medium"))
            for k in raw.get("kernel_failures", [])
        },
        matmul_autocast=raw.get("matmul_autocast", {}).get("value", "bf16"),
        complex_decompose_default=raw.get("complex_decompose_default", {}).get("value", False),
        raw=raw,
    )


@cache
def load(name: str) -> Profile:
    """Load a shipped profile by name; unknown names fail with the list of valid ones."""
    if name not in available():
        raise ValueError(f"NEURON_PROFILE={name!r}: unknown profile; choose one of {available()}")
    return _parse(json.loads((PROFILE_DIR / f"{name}.json").read_text()))
