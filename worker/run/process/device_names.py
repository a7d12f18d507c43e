"""The device names a user may type (``neuron``, ``cpu``, ``cuda:1``...), checked without importing torch.

``devices.resolve_device`` turns a name into a usable device (availability needs torch); the command line checks
the spelling here first, so a typo answers before torch loads.
"""

from __future__ import annotations

import re

# Names a user may pass (an index suffix such as cuda:1 is accepted too).
KNOWN_DEVICES: tuple[str, ...] = ("neuron", "cpu", "cuda", "mps", "xpu")
DEVICE_RE = re.compile(r"^(?P<type>[a-z_][a-z0-9_]*)(:(?P<index>\d+))?$")


def normalize(name: str) -> str:
    """How a device name is compared and stored: stripped, lower case."""
    return name.strip().lower()


def device_type(name: str) -> str | None:
    """``cuda:1`` -> ``cuda``; None when ``name`` is not a known device type with an optional ``:INDEX``."""
    m = DEVICE_RE.match(normalize(name)) if name else None
    if m is None or m.group("type") not in KNOWN_DEVICES:
        return None
    return m.group("type")
