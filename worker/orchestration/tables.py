"""The CLI's terminal tables (rich) over result records: the coverage table, one architecture's checks, blockers.

Presentation only: the numbers come from the pure rules of ``compat.results`` (coverage, blockers).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text

from compat.results import ALL_CHECKS, Blocker, ResultRecord, Status, coverage


def coverage_table(records: Iterable[ResultRecord], title: str = "coverage") -> Table:
    """Per-check status counts plus the architecture-level summary row."""
    records = list(records)
    cov = coverage(records)
    checks = [c for c in ALL_CHECKS if str(c) in cov.per_check]
    statuses = [s for s in Status if any(cov.per_check[str(c)][str(s)] for c in checks)]
    table = Table(title=title)
    table.add_column("check")
    for s in statuses:
        table.add_column(str(s), justify="right")
    for c in checks:
        table.add_row(str(c), *[str(cov.per_check[str(c)][str(s)] or "") for s in statuses])
    v = cov.verdicts
    table.caption = (f"{cov.architectures} architectures: {v['supported']} supported natively, "
                     f"{v['supported_with_fallback']} with CPU fallback, {v['failing']} failing, "
                     f"{v['reference_fail']} reference_fail, {v['skipped']} skipped, "
                     f"{v['not_judged']} not judged (support checks not run) "
                     f"({cov.pass_rate():.1%} supported; {cov.all_checks_pass(records)} pass every check)")
    return table


def results_table(records: list[ResultRecord], title: str) -> Table:
    """One row per check of one architecture (``compat show``).

    Status, op and timing never wrap (they are what a reader scans); the free-text detail takes the rest of the
    width and folds, so a narrow terminal still shows every status whole.
    """
    table = Table(title=title)
    for col in ("device", "check", "status"):
        table.add_column(col, no_wrap=True)
    table.add_column("detail", ratio=1, overflow="fold")
    table.add_column("blocking op", no_wrap=True)
    table.add_column("seconds", no_wrap=True, justify="right")
    order = {c: i for i, c in enumerate(ALL_CHECKS)}
    for r in sorted(records, key=lambda r: (r.device, order.get(r.check, 99))):
        detail = r.reason or (r.error.message.splitlines()[0][:120] if r.error and r.error.message else "")
        if r.status == Status.PASS and "cosine" in r.metrics:
            detail = f"cosine {r.metrics['cosine']:.6f}, max abs err {r.metrics.get('max_abs_err', 0):.3g}"
        if r.fallback_ops:
            detail += f" [fallback: {', '.join(r.fallback_ops[:5])}]"
        if r.known_issue:
            detail += f" [known: {r.known_issue}]"
        # Text, not a str: "[known: ...]" would otherwise be parsed as rich markup and silently vanish.
        table.add_row(r.device, str(r.check), str(r.status), Text(detail), Text(r.blocking_op or ""),
                      f"{r.duration_s:.2f}")
    return table


def blockers_table(ranked: list[Blocker], top: int | None = None) -> Table:
    table = Table(title="blocking ops")
    for col in ("#", "op", "blocks", "unlocks", "dtypes", "checks", "architectures"):
        table.add_column(col)
    for i, b in enumerate(ranked[:top] if top else ranked, 1):
        dtypes = ", ".join(v.split(" (", 1)[1].rstrip(")") for v in b.variants if " (" in v)
        archs = ", ".join(b.architectures[:4]) + (" ..." if len(b.architectures) > 4 else "")
        table.add_row(str(i), b.op, str(len(b.architectures)), str(len(b.unlocks)), dtypes, ", ".join(b.checks),
                      archs)
    return table
