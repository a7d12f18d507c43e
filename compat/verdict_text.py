"""One architecture's verdict in one line, for every surface that shows one architecture: supported natively,
supported with the CPU-fallback ops of each check named, or failing at its blocking op (issue 19)."""

from __future__ import annotations

from collections.abc import Iterable

from compat.blocking import blocking_record
from compat.ops import op_names
from compat.results import SUPPORT_CHECKS, ResultRecord, Status, arch_verdict


def verdict_text(records: Iterable[ResultRecord]) -> str:
    """``supported natively`` | ``supported with CPU fallback: forward aten::isin; generate aten::argmax`` |
    ``failing: forward unsupported_op at aten::sort (Int)`` | the verdict word for the rest (reference_fail, ...)."""
    recs = [r for r in records if r.check in SUPPORT_CHECKS]
    word = arch_verdict(recs)
    if word == "supported":
        return "supported natively"
    if word == "supported_with_fallback":
        parts = [f"{r.check} {', '.join(op_names(r.fallback_ops))}" for r in recs if r.fallback_ops]
        return "supported with CPU fallback: " + "; ".join(parts)
    first = blocking_record(recs) if word == "failing" else None  # the one rule of what blocks (compat.blocking)
    if first is not None:
        at = f" at {first.blocking_op}" if first.blocking_op else (f": {first.error.type}" if first.error else "")
        return f"failing: {first.check} {first.status}{at}"
    reasons = {r.reason for r in recs if r.status != Status.PASS and r.reason}
    return word.replace("_", " ") + (f": {sorted(reasons)[0]}" if reasons else "")
