"""Pure: the one-line message for a name that is not one of the valid choices, with "did you mean" suggestions.

A short list of choices (devices, checks, sources, profiles) is named in full; a long one (181 architectures, run
ids) never is: up to three close matches and the command that lists them all.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

MAX_SUGGESTIONS = 3
LIST_IN_FULL = 12  # at most this many choices are named in the message itself
CUTOFF = 0.6  # difflib's default similarity ratio: "LlamaForCausalLm" matches, "Nope" matches nothing


def close_matches(name: str, choices: Sequence[str], n: int = MAX_SUGGESTIONS,
                  key: Callable[[str], str] = str.lower) -> list[str]:
    """Up to ``n`` choices closest to ``name``, best first, compared by ``key`` (default: ignoring case); an
    exact match of the keys comes first."""
    by_key: dict[str, list[str]] = {}
    for choice in choices:
        by_key.setdefault(key(choice), []).append(choice)
    wanted = key(name.strip())
    found = difflib.get_close_matches(wanted, list(by_key), n=n, cutoff=CUTOFF)
    # A name that is a prefix or a part of a choice ("llama", "Mixtral") is what a user means more often than a
    # similarly spelled other choice; difflib's ratio alone misses it when the choice is much longer.
    if len(wanted) >= 3:
        found += sorted((k for k in by_key if wanted in k and k not in found),
                        key=lambda k: (not k.startswith(wanted), len(k)))
    if wanted in by_key:
        found = [wanted, *(f for f in found if f != wanted)]
    return [c for f in found for c in by_key[f]][:n]


def unknown(kind: str, name: str, choices: Sequence[str], *, list_all: str | None = None,
            plural: str | None = None, max_listed: int = LIST_IN_FULL,
            key: Callable[[str], str] = str.lower) -> str:
    """``unknown device 'tpux'; did you mean tpu? valid devices: ...`` as one line.

    ``kind`` names one choice ("device"), ``plural`` the many (default kind + "s"); ``list_all`` is how to see every
    choice when there are more than ``max_listed`` (e.g. "`compat catalog list`")."""
    plural = plural or f"{kind}s"
    parts = [f"unknown {kind} {name!r}"]
    matches = close_matches(name, choices, key=key)
    if matches:
        parts.append(f"did you mean {_or(matches)}?")
    if not choices:
        parts.append(f"no {plural} known")
    elif len(choices) <= max_listed:
        parts.append(f"valid {plural}: {', '.join(choices)}")
    elif list_all:
        parts.append(f"{len(choices)} {plural} known; list them with {list_all}")
    else:
        parts.append(f"{len(choices)} {plural} known")
    return "; ".join(parts[:1]) + "; " + " ".join(parts[1:])


def _or(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
