"""What moved between a baseline and a run (compat.moved), for every kind of determinant a run records."""

from __future__ import annotations

import pytest

from compat.moved import KINDS, LIBRARIES, what_moved

BASE = {"torch": "2.13.0", "transformers": "5.23.0", "peft": "0.18.0", "trl": "1.16.0", "accelerate": "1.15.0",
        "device backend": "neuron (simulated)", "backend version": "0.1.0", "profile": "trn2",
        "profile digest": "aaaa", "switch integer_sort_topk": "fails",
        "switch grouped_mm_preconditions": "enforced", "mode": "fallback", "harness": "0.1.0"}


@pytest.mark.parametrize(("key", "new", "kind", "line"), [
    *[(lib, "9.9.9", "library", f"{lib} {BASE[lib]} -> 9.9.9") for lib in LIBRARIES],
    ("device backend", "torch-neuronx (neuron device)", "device",
     "device backend neuron (simulated) -> torch-neuronx (neuron device)"),
    ("backend version", "0.2.0", "device", "backend version 0.1.0 -> 0.2.0"),
    ("profile", "trn3", "profile", "profile trn2 -> trn3"),
    ("profile digest", "bbbb", "profile", "profile digest aaaa -> bbbb"),
    ("switch integer_sort_topk", "runs", "switch", "switch integer_sort_topk: fails -> runs"),
    ("mode", "strict", "mode", "mode fallback -> strict"),
    ("harness", "0.2.0", "harness", "harness 0.1.0 -> 0.2.0"),
])
def test_each_kind_of_determinant_is_named_when_it_moves(key: str, new: str, kind: str, line: str) -> None:
    moved = what_moved(BASE, {**BASE, key: new})
    assert [(m.key, m.kind, m.before, m.after, m.line()) for m in moved] == [(key, kind, BASE[key], new, line)]


def test_every_fixed_key_has_a_kind() -> None:
    assert set(BASE) - {"switch integer_sort_topk", "switch grouped_mm_preconditions"} == set(KINDS)


def test_nothing_moves_between_equal_runs_or_against_a_run_that_recorded_nothing() -> None:
    assert what_moved(BASE, dict(BASE)) == []
    assert what_moved(None, BASE) == [] and what_moved({}, BASE) == []


def test_a_key_only_one_side_has_is_named_and_the_order_is_libraries_device_profile_switches_mode() -> None:
    after = {**BASE, "transformers": "5.24.0", "switch integer_sort_topk": "runs", "mode": "strict"}
    del after["switch grouped_mm_preconditions"]
    after["switch new_one"] = "on"
    lines = [m.line() for m in what_moved(BASE, after)]
    assert lines == ["transformers 5.23.0 -> 5.24.0", "switch grouped_mm_preconditions: enforced -> (none)",
                     "switch integer_sort_topk: fails -> runs", "switch new_one: (none) -> on",
                     "mode fallback -> strict"]
