"""Shortening a message for display without cutting a sentence in half: the one rule `compat show` and the
architecture page use for errors (issue 19: an error cut mid-sentence reads as a different error).
"""

from __future__ import annotations

import re

DETAIL_CHARS = 400  # an error shown whole up to this long; a longer one is cut at a sentence or line end within it
HARD_CHARS = 4 * DETAIL_CHARS  # a first sentence longer than this is cut at a word: a stack of text, not a sentence
SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)")


def shorten(text: str, bound: int = DETAIL_CHARS) -> tuple[str, bool]:
    """``text`` whole when it fits in ``bound`` characters, else cut at the last sentence or line end within
    them, or at the first one past them (a sentence is never cut; one over ``HARD_CHARS`` is, at a word); and
    whether it was cut."""
    text = text.strip()
    if len(text) <= bound:
        return text, False
    ends = sorted({m.end() for m in SENTENCE_END.finditer(text)} | {i for i, c in enumerate(text) if c == "\n"})
    within = [e for e in ends if 0 < e <= bound]
    cut = within[-1] if within else (ends[0] if ends else len(text))
    if cut > HARD_CHARS:
        cut = text.rfind(" ", 0, HARD_CHARS) if " " in text[:HARD_CHARS] else HARD_CHARS
    return (text, False) if cut >= len(text) else (text[:cut].rstrip(), True)
