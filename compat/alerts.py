"""What a notification says about a run: the webhook's JSON (Slack-compatible ``text`` plus the structured diff),
the failure signatures it groups regressions by, and the GitHub issue each signature gets (title, body, marker).

Pure functions of a ``compat.diff.RunDiff``; ``worker/orchestration/notify.py`` sends them. Built on the flake guard
and the failure signatures (issue 34 items 1 and 3): a diff's ``regressions`` are the confirmed ones (its ``flaky``
are counted apart, never sent as regressions), and its ``signatures`` group them (``of_diff``). ``payload`` and
``issue_actions`` also take both as arguments.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compat.diff import Change, RunDiff

WEBHOOK_SCHEMA = 1  # bumped when the payload's fields change meaning
ISSUE_LABEL = "compat-regression"
_MARKER = re.compile(r"<!-- compat-signature: ([0-9a-f]{16}) -->")
_KEYS = re.compile(r"<!-- compat-keys: (.*?) -->")
_EXAMPLES = 5  # architectures named per signature in text (the JSON carries every change)


@dataclass(frozen=True)
class Signature:
    """One failure shape: status, first blocking op (or the error's normalised first line), and the changes with it."""

    status: str
    what: str  # the blocking op, e.g. "aten::sort (Int)", or a normalised error line
    changes: tuple[Change, ...]

    @property
    def key(self) -> str:
        """Stable across runs: the digest of (status, what), the marker an issue is found again by."""
        return hashlib.sha256(f"{self.status}\n{self.what}".encode()).hexdigest()[:16]

    @property
    def architectures(self) -> list[str]:
        return sorted({c.architecture for c in self.changes})

    def title(self) -> str:
        archs = self.architectures
        more = f" and {len(archs) - _EXAMPLES} more" if len(archs) > _EXAMPLES else ""
        return f"{self.status}: {self.what} ({', '.join(archs[:_EXAMPLES])}{more})"


def normalise(detail: str) -> str:
    """The first line of a detail with what differs between occurrences blanked: numbers, hex ids, quoted paths."""
    line = (detail.strip().splitlines() or [""])[0]
    line = re.sub(r"0x[0-9a-fA-F]+", "<hex>", line)
    line = re.sub(r"(?<![A-Za-z_\d])\d+(?:\.\d+)?", "N", line)  # a dtype's width (BFloat16) stays
    return re.sub(r"'/[^']*'", "'…'", line)[:160]


def signatures_of(changes: Iterable[Change]) -> list[Signature]:
    """Regressions grouped by (status, normalised detail), biggest group first: for a diff that carries no
    ``compat.signatures`` of its own (``of_diff`` prefers those)."""
    groups: dict[tuple[str, str], list[Change]] = {}
    for c in changes:
        groups.setdefault((c.after or "-", normalise(c.detail) or "(no detail)"), []).append(c)
    sigs = [Signature(status, what, tuple(cs)) for (status, what), cs in groups.items()]
    return sorted(sigs, key=lambda s: (-len(s.architectures), s.status, s.what))


def of_diff(diff: RunDiff, confirmed: Sequence[Change]) -> list[Signature]:
    """The diff's own failure signatures (``compat.signatures``, grouped by the gate) restricted to the confirmed
    regressions, each with its changes; ``signatures_of`` where the diff carries none (a diff built without them)."""
    if not diff.signatures:
        return signatures_of(confirmed)
    out = []
    for sig in diff.signatures:
        archs, checks = set(sig.architectures), set(sig.checks)
        mine = tuple(c for c in confirmed if c.after == sig.status and c.architecture in archs and c.check in checks
                     and (sig.op is None or c.detail == sig.op))
        if mine:
            out.append(Signature(sig.status, sig.op or sig.error or "(no detail)", mine))
    return out


def diff_page(public_url: str, diff: RunDiff) -> str | None:
    """The run's diff page (dashboards/run_views.py ``/runs/diff``) at the public address; None without one."""
    if not public_url or not diff.baseline_run:
        return None
    return f"{public_url.rstrip('/')}/runs/diff?a={diff.baseline_run}&b={diff.current_run}"


def _by_arch(changes: Sequence[Change]) -> list[str]:
    """``Arch forward, generate: pass -> unsupported_op (aten::sort (Int))``, one line per architecture and move."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for c in changes:
        groups.setdefault((c.architecture, c.before or "-", c.after or "-", c.detail), []).append(c.check)
    return [f"{arch} {', '.join(checks)}: {before} -> {after}" + (f" ({detail})" if detail else "")
            for (arch, before, after, detail), checks in groups.items()]


def payload(diff: RunDiff, *, identity: Mapping[str, Any], public_url: str = "",
            confirmed: Sequence[Change] | None = None, signatures: Sequence[Signature] | None = None,
            ) -> dict[str, Any] | None:
    """The webhook's one JSON body for a run, or None when it has no confirmed regression (nothing is sent).
    ``confirmed``: the regressions the flake guard confirmed (default: all of ``diff.regressions``);
    ``signatures``: their failure signatures (default: ``signatures_of(confirmed)``)."""
    regs = list(diff.regressions if confirmed is None else confirmed)
    if not regs:
        return None
    sigs = list(signatures) if signatures is not None else of_diff(diff, regs)
    device = identity.get("device", "?")
    archs = sorted({c.architecture for c in regs})
    url = diff_page(public_url, diff)
    head = (f"neuron-compat: {len(regs)} confirmed regression(s) in {len(archs)} architecture(s) on {device} "
            f"(run {diff.current_run[:12]} vs {(diff.baseline_run or '-')[:12]}, lane {identity.get('lane', '?')})")
    lines = [head]
    if diff.moved:  # what moved between the baseline and the run (compat.moved), above the regressions
        lines.append("moved: " + "; ".join(m.line() for m in diff.moved))
    lines += [f"• {line}" for line in _by_arch(regs)]
    if diff.flaky:
        lines.append(f"({len(diff.flaky)} flaky: passed on a re-run, not counted)")
    if url:
        # Slack's link syntax in ``text``: <url|label> (https://docs.slack.dev/messaging/formatting-message-text,
        # "Linking URLs"); other chat tools show it as text.
        lines.append(f"<{url}|run diff>")
    return {
        "schema": WEBHOOK_SCHEMA,
        "text": "\n".join(lines),
        "run": diff.current_run, "baseline": diff.baseline_run, "url": url,
        "device": device, "lane": identity.get("lane"), "versions": dict(identity.get("versions") or {}),
        "regressed_architectures": archs,
        "confirmed_regressions": [c.__dict__.copy() for c in regs],
        "signatures": [{"key": s.key, "status": s.status, "what": s.what, "architectures": s.architectures,
                        "count": len(s.changes)} for s in sigs],
        "moved": [m.line() for m in diff.moved],
        "flaky": [c.__dict__.copy() for c in diff.flaky],
        "diff": diff.as_dict(),
    }


# -- GitHub issues: one per signature ---------------------------------------------------------------------------

def _key_text(c: Change) -> str:
    return f"{c.architecture}|{c.device}|{c.check}"


def issue_body(sig: Signature, diff: RunDiff, url: str | None) -> str:
    """A new issue's body: what failed, where to look, and the two markers it is found again and judged by."""
    rows = "\n".join(f"- `{line}`" for line in _by_arch(sig.changes))
    link = f"\n\nRun diff: {url}" if url else ""
    return (f"neuron-compat found a confirmed regression: **{sig.status}** at `{sig.what}` in run "
            f"`{diff.current_run}` (baseline `{diff.baseline_run}`).\n\n{rows}{link}\n\n"
            f"This issue is updated by the nightly: a repeat adds a comment; it is closed when every check listed "
            f"here passes again.\n\n<!-- compat-signature: {sig.key} -->\n"
            f"<!-- compat-keys: {';'.join(sorted({_key_text(c) for c in sig.changes}))} -->\n")


def marker_of(body: str | None) -> str | None:
    """The signature key an issue body carries, or None (not ours)."""
    m = _MARKER.search(body or "")
    return m[1] if m else None


def keys_of(body: str | None) -> set[tuple[str, str, str]]:
    """The (architecture, device, check) keys an issue is about."""
    m = _KEYS.search(body or "")
    return {tuple(k.split("|", 2)) for k in m[1].split(";") if k.count("|") == 2} if m else set()  # type: ignore[misc]


def with_keys(body: str, sig: Signature) -> str:
    """The body with the keys of a repeat added (so the fix rule waits for them too)."""
    keys = {"|".join(k) for k in keys_of(body)} | {_key_text(c) for c in sig.changes}
    return _KEYS.sub(f"<!-- compat-keys: {';'.join(sorted(keys))} -->", body, count=1)


@dataclass(frozen=True)
class IssueAction:
    """One thing to do on GitHub: ``open`` a new issue, ``comment`` on a repeat (and widen its keys), ``close`` a
    fixed one with a comment."""

    kind: str  # open | comment | close
    signature: str  # the key
    title: str = ""
    body: str = ""  # the issue body (open) or the comment (comment, close)
    number: int | None = None  # the existing issue (comment, close)
    new_body: str | None = None  # comment: the issue body with the repeat's keys added


def issue_actions(diff: RunDiff, open_issues: Sequence[Mapping[str, Any]], current: Mapping[tuple[str, str, str], str],
                  *, public_url: str = "", confirmed: Sequence[Change] | None = None,
                  signatures: Sequence[Signature] | None = None) -> list[IssueAction]:
    """What to do on GitHub after a run. ``open_issues``: the repository's open issues (``number``, ``body``);
    ``current``: the run's status per (architecture, device, check). A signature of this run's confirmed regressions
    with an open issue gets a comment, else a new issue; an open issue of ours, not seen in this run, whose every
    key passes in ``current`` is closed with a comment (a key the run did not measure keeps it open)."""
    regs = list(diff.regressions if confirmed is None else confirmed)
    sigs = list(signatures) if signatures is not None else of_diff(diff, regs)
    url = diff_page(public_url, diff)
    ours = {marker_of(i.get("body")): i for i in open_issues if marker_of(i.get("body"))}
    actions: list[IssueAction] = []
    for sig in sigs:
        issue = ours.get(sig.key)
        if issue is None:
            actions.append(IssueAction("open", sig.key, title=f"[compat] {sig.title()}",
                                       body=issue_body(sig, diff, url)))
        else:
            rows = "\n".join(f"- `{line}`" for line in _by_arch(sig.changes))
            actions.append(IssueAction("comment", sig.key, number=int(issue["number"]),
                                       body=f"Seen again in run `{diff.current_run}`:\n\n{rows}"
                                            + (f"\n\nRun diff: {url}" if url else ""),
                                       new_body=with_keys(str(issue.get("body") or ""), sig)))
    seen = {s.key for s in sigs}
    for key, issue in ours.items():
        keys = keys_of(issue.get("body"))
        if key in seen or not keys or any(current.get(k) != "pass" for k in keys):
            continue
        actions.append(IssueAction("close", str(key), number=int(issue["number"]),
                                   body=f"Fixed: every check of this issue passes in run `{diff.current_run}`."
                                        + (f"\n\nRun diff: {url}" if url else "")))
    return actions
