"""How a count of things is spelled on every surface: "1 architecture", "2 architectures", never "1 architectures".

Pure, and read by the CLI's tables and the pages' templates alike (issue 30).
"""

from __future__ import annotations

IRREGULAR = {"fix": "fixes", "switch": "switches"}


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is 1 (``many``: a plural that is not noun + "s")."""
    return f"{n} {noun if n == 1 else (many or IRREGULAR.get(noun, noun + 's'))}"
