"""Pure summaries of result records: coverage (native vs with fallback), the coverage table, the blocker ranking.

Nothing here prints or touches storage; the CLI renders what these functions return.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.table import Table
from rich.text import Text

from compat.results import (
    ALL_CHECKS,
    FAILURE_STATUSES,
    SUPPORT_CHECKS,
    Check,
    ResultRecord,
    Status,
    is_supported,
    used_fallback,
)

BLOCKING_STATUSES = frozenset({Status.UNSUPPORTED_OP, Status.UNSUPPORTED_DTYPE, Status.ERROR, Status.OOM,
                               Status.MISMATCH, Status.CRASH, Status.TIMEOUT})


def by_architecture(records: Iterable[ResultRecord]) -> dict[str, list[ResultRecord]]:
    out: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in records:
        out[r.architecture].append(r)
    return dict(out)


def arch_verdict(records: list[ResultRecord]) -> str:
    """One word per architecture: supported | supported_with_fallback | failing | reference_fail | skipped |
    not_judged."""
    if is_supported(records):
        return "supported_with_fallback" if used_fallback(records) else "supported"
    support = [r for r in records if r.check in SUPPORT_CHECKS]
    if support and all(r.status == Status.SKIPPED for r in support):
        return "skipped"
    if any(r.status in FAILURE_STATUSES for r in support):
        return "failing"
    if any(r.status == Status.REFERENCE_FAIL for r in support):
        return "reference_fail"
    return "not_judged"  # a support check was not run (e.g. --checks load,forward): no verdict either way


@dataclass
class Coverage:
    architectures: int = 0
    verdicts: Counter = field(default_factory=Counter)  # arch_verdict -> count
    per_check: dict[str, Counter] = field(default_factory=dict)  # check -> status -> count
    known_failures: int = 0  # failing records explained by the known-issues file

    @property
    def supported(self) -> int:
        return self.verdicts["supported"] + self.verdicts["supported_with_fallback"]

    @property
    def runnable(self) -> int:
        """Architectures the device could be judged on (not skipped, reference did not fail)."""
        return self.architectures - self.verdicts["skipped"] - self.verdicts["reference_fail"]

    def pass_rate(self) -> float:
        return self.supported / self.architectures if self.architectures else 0.0

    def all_checks_pass(self, records: Iterable[ResultRecord]) -> int:
        """Architectures whose every recorded check passed (the cpu self-check's number)."""
        return sum(1 for recs in by_architecture(records).values() if all(r.status == Status.PASS for r in recs))


def coverage(records: Iterable[ResultRecord]) -> Coverage:
    records = list(records)
    cov = Coverage()
    groups = by_architecture(records)
    cov.architectures = len(groups)
    for recs in groups.values():
        cov.verdicts[arch_verdict(recs)] += 1
    for r in records:
        cov.per_check.setdefault(str(r.check), Counter())[str(r.status)] += 1
        if r.known_issue and r.status != Status.PASS:
            cov.known_failures += 1
    return cov


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


@dataclass
class Blocker:
    op: str  # aten::name (dtype spellings are in ``variants``)
    architectures: list[str]  # blocked (some failing support check names this op)
    unlocks: list[str]  # blocked by this op alone: implementing it would make them pass every blocked check
    variants: list[str]  # e.g. ["aten::histc (Long)"]
    checks: list[str]

    @property
    def message(self) -> str:
        return (f"implement {self.op} to unlock {len(self.unlocks)} architecture(s) "
                f"(blocks {len(self.architectures)})")


def blockers(records: Iterable[ResultRecord], *, checks: Iterable[Check] = tuple(ALL_CHECKS)) -> list[Blocker]:
    """Rank ops by how many architectures they block (ties: by how many they alone block, then name)."""
    wanted = set(checks)
    blocked: dict[str, set[str]] = defaultdict(set)
    variants: dict[str, set[str]] = defaultdict(set)
    in_checks: dict[str, set[str]] = defaultdict(set)
    ops_of_arch: dict[str, set[str]] = defaultdict(set)
    unexplained: set[str] = set()  # architectures with a failure that names no op: no single op unlocks them
    for r in records:
        if r.check not in wanted or r.status not in BLOCKING_STATUSES:
            continue
        if not r.blocking_op:
            unexplained.add(r.architecture)
            continue
        op = r.blocking_op.split(" (")[0]
        blocked[op].add(r.architecture)
        variants[op].add(r.blocking_op)
        in_checks[op].add(str(r.check))
        ops_of_arch[r.architecture].add(op)
    out = []
    for op, archs in blocked.items():
        alone = sorted(a for a in archs if ops_of_arch[a] == {op} and a not in unexplained)
        out.append(Blocker(op, sorted(archs), alone, sorted(variants[op]), sorted(in_checks[op])))
    out.sort(key=lambda b: (-len(b.architectures), -len(b.unlocks), b.op))
    return out


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
