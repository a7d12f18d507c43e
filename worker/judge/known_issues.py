"""Known issues: expected failures (architecture, check, device, reason, link) read from worker/known_issues.json.

A failing record that matches one is annotated with ``known_issue`` so reports show it as known, not as news.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from compat.ops import op_name
from compat.results import FAILURE_STATUSES, ResultRecord, Status

DEFAULT_PATH = Path(__file__).with_name("known_issues.json")


class KnownIssue(BaseModel):
    architecture: str  # class name, e.g. "MambaForCausalLM", or "*" for any
    check: str | None = None  # None = any check
    device: str | None = None  # None = any device; "neuron" matches "neuron" only
    op: str | None = None  # only failures whose blocking op is this aten op (any dtype), e.g. "aten::histc"
    reason: str
    link: str | None = None

    def matches(self, rec: ResultRecord) -> bool:
        return (self.architecture in ("*", rec.architecture)
                and self.check in (None, str(rec.check))
                and self.device in (None, rec.device.split(":")[0])
                and (self.op is None or op_name(rec.blocking_op or "") == self.op))

    def label(self) -> str:
        return f"{self.reason} ({self.link})" if self.link else self.reason


def load_known_issues(path: Path | None = None) -> list[KnownIssue]:
    """Parse the known-issues file; a malformed file is an error (a silently ignored file hides regressions)."""
    return list(_load(str(path or DEFAULT_PATH)))


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[KnownIssue, ...]:
    data = json.loads(Path(path).read_text())
    return tuple(KnownIssue.model_validate(item) for item in data["issues"])


def annotate(records: list[ResultRecord], issues: list[KnownIssue]) -> list[ResultRecord]:
    """Mark failing (or reference_fail) records that a known issue explains; passes are never marked."""
    out = []
    for rec in records:
        if rec.status in FAILURE_STATUSES or rec.status == Status.REFERENCE_FAIL:
            hit = next((i for i in issues if i.matches(rec)), None)
            if hit is not None:
                rec = rec.model_copy(update={"known_issue": hit.label()})
        out.append(rec)
    return out
