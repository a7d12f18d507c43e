"""The device identity (compat.identity): name, profile and strict, spelled once; a plain name's default profile."""

from __future__ import annotations

import pytest

from compat.identity import DEFAULT_PROFILE, Identity, identity_of, parse, resolve


@pytest.mark.parametrize(("ident", "label"), [
    (Identity("neuron", "trn2"), "neuron (trn2)"),
    (Identity("neuron", "trn3", strict=True), "neuron (trn3, strict)"),
    (Identity("neuron", "legacy-xla"), "neuron (legacy-xla)"),
    (Identity("cpu"), "cpu"),
    (Identity("cuda:1", strict=True), "cuda:1 (strict)"),
])
def test_label_and_parse_round_trip(ident: Identity, label: str) -> None:
    assert ident.label == label
    assert parse(label) == ident


def test_parse_refuses_what_is_no_identity() -> None:
    assert parse("neuron (trn2, trn3)") is None
    assert parse("neuron ()") is None
    assert parse("neuron trn2") is None


def test_identity_of_reads_the_recorded_details_and_the_runs_own_setting_wins() -> None:
    assert identity_of("neuron", {"profile": "trn3", "strict": False}).label == "neuron (trn3)"
    assert identity_of("neuron", {"profile": "trn3", "strict": True}).label == "neuron (trn3, strict)"
    assert identity_of("cpu", {}, strict=True).label == "cpu (strict)"
    assert identity_of("neuron", None).label == "neuron"


def test_a_plain_name_resolves_to_its_default_profile_never_to_the_newest_profile() -> None:
    known = ["cpu", "neuron (legacy-xla)", "neuron (trn2)", "neuron (trn2, strict)"]
    assert resolve("neuron", known) == "neuron (trn2)"
    assert resolve("neuron (legacy-xla)", known) == "neuron (legacy-xla)"
    assert resolve("cpu", known) == "cpu"
    assert resolve("neuron (trn3)", known) is None
    # Without the default profile stored, a plain name names its only identity, and none when there are several.
    assert resolve("neuron", ["neuron (trn3)"]) == "neuron (trn3)"
    assert resolve("neuron", ["neuron (trn3)", "neuron (legacy-xla)"]) is None
    assert resolve("cuda", known) is None


def test_the_default_profile_is_the_devices_own() -> None:
    from neuron_backend.config import ENVIRONMENT

    assert DEFAULT_PROFILE["neuron"] == ENVIRONMENT["NEURON_PROFILE"][0]
