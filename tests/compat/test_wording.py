"""The one spelling of a count (issue 30: "1 architectures")."""

from __future__ import annotations

from compat.wording import plural


def test_plural_spells_one_and_many() -> None:
    assert plural(1, "architecture") == "1 architecture"
    assert plural(0, "architecture") == "0 architectures"
    assert plural(181, "architecture") == "181 architectures"
    assert plural(2, "fix") == "2 fixes"
    assert plural(2, "switch") == "2 switches"
    assert plural(3, "ox", "oxen") == "3 oxen"
