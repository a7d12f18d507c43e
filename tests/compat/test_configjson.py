"""compat.configjson: canonical text and digest, non-finite paths, and the tagged stored form round trip."""

from __future__ import annotations

import json
import math

from compat.configjson import (
    ESCAPE_TAG,
    FLOAT_TAG,
    canonical,
    config_digest,
    from_stored,
    non_finite_paths,
    to_stored,
)

CFG = {"time_step_limit": [0.0, math.inf], "x": {"nan": math.nan, "neg": -math.inf}, "n": 1}


def _same(a: object, b: object) -> bool:
    """Equality where NaN equals NaN (json text of both sides)."""
    return canonical(a) == canonical(b)


def test_stored_form_is_strict_json_and_round_trips() -> None:
    stored = to_stored(CFG)
    text = json.dumps(stored, allow_nan=False)  # strict JSON: what PostgreSQL's json type accepts
    back = from_stored(json.loads(text))
    assert back["time_step_limit"][1] == math.inf and math.isnan(back["x"]["nan"]) and back["x"]["neg"] == -math.inf
    assert _same(back, CFG)


def test_user_dicts_shaped_like_tags_stay_dicts() -> None:
    tricky = {"a": {FLOAT_TAG: "NaN"}, "b": {ESCAPE_TAG: {"c": 1}}, "c": {FLOAT_TAG: 3}}
    assert from_stored(json.loads(json.dumps(to_stored(tricky), allow_nan=False))) == tricky


def test_digest_ignores_formatting_and_key_order_but_not_values() -> None:
    assert config_digest({"a": 1, "b": math.inf}) == config_digest(json.loads('{"b": Infinity,  "a": 1}'))
    assert config_digest({"a": 1}) != config_digest({"a": 2})
    assert len(config_digest(CFG)) == 64


def test_non_finite_paths_name_each_value() -> None:
    assert non_finite_paths(CFG) == ["time_step_limit[1]", "x.nan", "x.neg"]
    assert non_finite_paths({"a": [1.0, 2]}) == []
