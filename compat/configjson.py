"""The JSON form of a config.json everywhere it travels: parsing with NaN/Infinity kept, the canonical text and its
digest, and the tagged form for JSON columns of databases that refuse non-finite numbers.

Transformers writes non-finite floats as the bare tokens ``NaN``/``Infinity`` (Python's ``json`` does, and Nemotron-H's
``time_step_limit`` is ``[0.0, Infinity]``); strict JSON has no spelling for them, so PostgreSQL's ``json`` type
rejects them. A value must come out of every hop exactly as it went in.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

# The tag of a non-finite float in the stored form; a dict that happens to be shaped like a tag is escaped.
FLOAT_TAG = "$float"
ESCAPE_TAG = "$escaped"
_TAGS = (FLOAT_TAG, ESCAPE_TAG)


def canonical(config: Any) -> str:
    """One text per value: sorted keys, no spaces, NaN/Infinity as Python's json writes them."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True, ensure_ascii=False)


def config_digest(config: Any) -> str:
    """sha256 of the canonical text: the same config gives the same digest, whatever its formatting."""
    return hashlib.sha256(canonical(config).encode("utf-8")).hexdigest()


def non_finite_paths(value: Any, path: str = "") -> list[str]:
    """Dotted paths of every NaN/Infinity in ``value`` (``time_step_limit[1]``), in document order."""
    if isinstance(value, float) and not math.isfinite(value):
        return [path or "<root>"]
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += non_finite_paths(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += non_finite_paths(v, f"{path}[{i}]")
    return out


def to_stored(value: Any) -> Any:
    """The value with every non-finite float replaced by ``{"$float": "NaN" | "Infinity" | "-Infinity"}``: valid
    strict JSON, so any database's JSON type stores it. ``from_stored`` is its exact inverse."""
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT_TAG: "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, dict):
        out = {k: to_stored(v) for k, v in value.items()}
        if len(value) == 1 and next(iter(value)) in _TAGS:
            return {ESCAPE_TAG: out}  # a user dict shaped like a tag must not decode as one
        return out
    if isinstance(value, list):
        return [to_stored(v) for v in value]
    return value


def from_stored(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            key, inner = next(iter(value.items()))
            if key == FLOAT_TAG and inner in ("NaN", "Infinity", "-Infinity"):
                return float(inner.replace("Infinity", "inf"))
            if key == ESCAPE_TAG and isinstance(inner, dict):
                return {k: from_stored(v) for k, v in inner.items()}
        return {k: from_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_stored(v) for v in value]
    return value
