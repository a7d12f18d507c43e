"""Failure signatures: a run's new failures grouped by status, first blocking op and the normalised first line of the
error, with counts and example architectures (issue 34 item 3), so forty architectures failing on one op read as one
line, not forty.

Pure: ``compat.diff`` groups a diff's new failures with it; the CLI, the API's diff and the run diff page show them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

EXAMPLES = 3  # architectures named per signature (the count says how many there are)
MAX_TEXT = 160  # a normalised line longer than this is cut (a signature is a key, not the whole message)

# What varies between two reports of one failure and would split it into many signatures: addresses, paths,
# numbers (sizes, shapes, indices, timings). Codes such as NCC_EVRF013 or float8_e4m3fn keep their digits: a
# number only counts where it stands alone as a word.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x…"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.\-]+){2,}/?"), "<path>"),
    (re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])"), "N"),
    (re.compile(r"\s+"), " "),
)


def normalise(message: str | None, architecture: str | None = None) -> str:
    """The first non-empty line of ``message`` with what varies between occurrences replaced: hex addresses,
    paths, free-standing numbers, the architecture's own name (``<arch>``)."""
    line = next((ln.strip() for ln in (message or "").splitlines() if ln.strip()), "")
    if architecture:  # as a whole word: a short name must not eat into an error code
        line = re.sub(rf"(?<!\w){re.escape(architecture)}(?!\w)", "<arch>", line)
    for pattern, repl in _RULES:
        line = pattern.sub(repl, line)
    line = line.strip()
    return line if len(line) <= MAX_TEXT else line[:MAX_TEXT - 1] + "…"


@dataclass
class Signature:
    status: str
    op: str | None  # the first blocking op, e.g. "aten::sort (Int)"; None when the failure named none
    error: str  # the normalised first line of the error ("" when there was none)
    count: int = 0  # failing (architecture, check) keys
    architectures: list[str] = field(default_factory=list)  # every one, first seen first
    checks: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.status, self.op or "", self.error)

    @property
    def examples(self) -> list[str]:
        return self.architectures[:EXAMPLES]

    def line(self) -> str:
        what = " ".join(p for p in (self.status, f"[{self.op}]" if self.op else "", self.error) if p)
        more = len(self.architectures) - len(self.examples)
        names = ", ".join(self.examples) + (f" and {more} more" if more > 0 else "")
        return (f"{self.count} x {what}: {len(self.architectures)} architecture(s) ({names}); "
                f"checks {', '.join(self.checks)}")

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "op": self.op, "error": self.error, "count": self.count,
                "architectures": list(self.architectures), "examples": self.examples, "checks": list(self.checks),
                "line": self.line()}


@dataclass(frozen=True)
class Failure:
    """One new failure as a signature sees it."""

    architecture: str
    check: str
    status: str
    op: str | None
    error: str | None  # the error's message (or the record's reason when it has no error)


def group(failures: Iterable[Failure]) -> list[Signature]:
    """Signatures, the most frequent first (then by status, op, text): each with its count, its architectures in
    the order first seen, and its checks."""
    out: dict[tuple[str, str, str], Signature] = {}
    for f in failures:
        sig = Signature(f.status, f.op or None, normalise(f.error, f.architecture))
        sig = out.setdefault(sig.key, sig)
        sig.count += 1
        if f.architecture not in sig.architectures:
            sig.architectures.append(f.architecture)
        if f.check not in sig.checks:
            sig.checks.append(f.check)
    return sorted(out.values(), key=lambda s: (-s.count, s.status, s.op or "", s.error))
