"""A profile source reference as a page shows it: a readable label, a valid link, and the note that came with it.

The profiles cite sources as free text ("https://... (rst date-modified 10/19/2026)", "github.com/owner/repo @ SHA:
path"); linking the whole text made broken hrefs (issue 30). Pure: text in, ``SourceLink`` out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_URL = re.compile(r"https?://[^\s<>\"']+")
# "github.com/OWNER/REPO @ COMMIT: PATH[ and the rest]" (neuron_backend/hardware/profiles/*.json, "sources")
_GITHUB = re.compile(r"^(?:https?://)?github\.com/(?P<repo>[\w.-]+/[\w.-]+)\s*@\s*(?P<commit>[0-9a-f]{7,40})"
                     r"(?::\s*(?P<rest>.*))?$", re.S)
_PLAIN_PATH = re.compile(r"^[\w./-]+$")


@dataclass(frozen=True)
class SourceLink:
    """``label`` linked to ``href`` (None: plain text), then ``note`` (what the reference adds: a date, a path)."""

    label: str
    href: str | None = None
    note: str = ""


def source_link(ref: str) -> SourceLink:
    """One reference as a link: a GitHub file at its commit (the commit tree when the path is not one file), the
    first URL of a text with the rest as its note, or the text itself."""
    ref = ref.strip()
    gh = _GITHUB.match(ref)
    if gh:
        repo, commit, rest = gh["repo"], gh["commit"], (gh["rest"] or "").strip()
        one_file = bool(rest) and _PLAIN_PATH.match(rest) is not None
        href = (f"https://github.com/{repo}/blob/{commit}/{rest}" if one_file
                else f"https://github.com/{repo}/tree/{commit}")
        return SourceLink(f"{repo}{' · ' + rest if one_file else ''} @ {commit[:7]}", href,
                          "" if one_file else rest)
    url = _URL.search(ref)
    if url:
        href = url.group(0).rstrip(".,;:)")
        parts = urlsplit(href)
        label = parts.netloc.removeprefix("www.") + (parts.path if parts.path not in ("", "/") else "")
        note = (ref[:url.start()] + ref[url.start() + len(href):]).strip(" ,;")
        if note.startswith("(") and note.endswith(")"):
            note = note[1:-1]
        return SourceLink(label, href, note)
    return SourceLink(ref)
