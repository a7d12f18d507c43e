"""The one vocabulary for filtering architectures by status: what ``GET /api/v1/architectures?status=`` and the
matrix page's status filter accept, and the one rule deciding whether an architecture's checks match a word.

Words: ``supported`` (every support check passed, CPU fallback allowed: the headline's rule), ``not_supported`` (its
complement), ``failing`` (a check failed on the device: a status of ``FAILURE_STATUSES``; ``reference_fail``,
``harness_error`` and ``skipped`` never are), or any per-check status (``mismatch``, ``pass``, ...). ``unsupported``
was the API's older spelling of ``not_supported`` and is read as it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from compat.results import FAILURE_STATUSES, Status, is_supported_statuses

# Architecture-level words, with the label the pages show for each.
GROUPS: dict[str, str] = {
    "supported": "supported",
    "not_supported": "not supported",
    "failing": "any check failing on the device",
}
ALIASES = {"unsupported": "not_supported"}
WORDS: tuple[str, ...] = (*GROUPS, *(s.value for s in Status))
_FAILURES = frozenset(s.value for s in FAILURE_STATUSES)


def normalise(word: str) -> str:
    """``word`` in the vocabulary (an alias read as its word); ValueError naming the accepted words otherwise."""
    word = ALIASES.get(word, word)
    if word not in WORDS:
        raise ValueError(f"unknown status filter {word!r}; use one of: {', '.join(WORDS)}")
    return word


def matches(statuses: Mapping[str, str], word: str, checks: Collection[str] | None = None) -> bool:
    """Whether an architecture with ``statuses`` (check -> status on one device) matches ``word``.

    ``supported``/``not_supported`` read every support check, whatever ``checks`` says; ``failing`` and a per-check
    status read only ``checks`` when given (the check filter, or the columns a page shows)."""
    word = normalise(word)
    if word == "supported":
        return is_supported_statuses(statuses)
    if word == "not_supported":
        return not is_supported_statuses(statuses)
    seen = [s for c, s in statuses.items() if checks is None or c in checks]
    if word == "failing":
        return any(s in _FAILURES for s in seen)
    return word in seen
