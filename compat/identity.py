"""A device's identity in the store: its name, the profile it modelled and whether it ran strict (no CPU fallback),
spelled once, e.g. ``neuron (trn2)``, ``neuron (trn3, strict)``, ``cpu``.

Runs, headlines, baselines, history and the gate are per identity (issue 32 item 4): a trn3 run is never compared
with a trn2 run, nor a strict run with a fallback one. Pure; ``service.runs`` applies it to the store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The profile a device models when none is chosen: neuron_backend/config.py's default (NEURON_PROFILE unset =
# trn2; tests/compat/test_identity.py keeps the two equal). A plain ``--device neuron`` read means this one.
DEFAULT_PROFILE: dict[str, str] = {"neuron": "trn2"}

_LABEL = re.compile(r"^(?P<name>[^\s()]+)(?: \((?P<inner>[^()]*)\))?$")


@dataclass(frozen=True)
class Identity:
    name: str  # the torch device string: "neuron", "cpu", "cuda:1"
    profile: str | None = None  # the simulated device's profile (trn2, trn3, legacy-xla); None: the device has none
    strict: bool = False  # no op may fall back to the CPU (``compat sweep --strict``)

    @property
    def label(self) -> str:
        parts = [p for p in (self.profile, "strict" if self.strict else None) if p]
        return f"{self.name} ({', '.join(parts)})" if parts else self.name


def identity_of(name: str, details: Mapping[str, Any] | None, strict: bool | None = None) -> Identity:
    """A run's identity from its device name and recorded details (``DeviceInfo.details``: the simulated device's
    ``profile`` and ``strict``); ``strict`` given: the run's own setting wins over the details'."""
    details = details or {}
    profile = details.get("profile") or None
    on = bool(details.get("strict")) if strict is None else bool(strict)
    return Identity(name, str(profile) if profile else None, on)


def parse(label: str) -> Identity | None:
    """``neuron (trn3, strict)`` -> Identity; a plain name (``neuron``) has no profile and is not strict. None when
    ``label`` is not an identity's spelling."""
    m = _LABEL.match(label.strip())
    if m is None:
        return None
    inner = [p.strip() for p in (m["inner"] or "").split(",") if p.strip()]
    strict = "strict" in inner
    rest = [p for p in inner if p != "strict"]
    if len(rest) > 1 or (m["inner"] is not None and not inner):
        return None
    return Identity(m["name"], rest[0] if rest else None, strict)


def resolve(wanted: str, known: Iterable[str]) -> str | None:
    """The stored identity a user's device string names: itself when stored; a plain name (``neuron``) names its
    default profile, fallback on (``neuron (trn2)``), else its only stored identity. None when none matches."""
    known = list(known)
    if wanted in known:
        return wanted
    ident = parse(wanted)
    if ident is None or ident.profile is not None or ident.strict:
        return None
    default = DEFAULT_PROFILE.get(ident.name)
    if default is not None and (label := Identity(ident.name, default).label) in known:
        return label
    same = [k for k in known if (p := parse(k)) is not None and p.name == ident.name]
    return same[0] if len(same) == 1 else None
