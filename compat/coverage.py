"""Coverage over one run's records: the verdict counts and the device report (out of the box, native, failing, native
per check), and the ops on the CPU fallback ranked by what implementing them natively gains (blockers and what
implementing them unlocks are ``compat.chains``).

Pure rules over ``compat.results`` records, shared by every reader (docs/ARCHITECTURE.md, "Read rules").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from compat.ops import op_name
from compat.results import (
    ALL_CHECKS,
    SUPPORT_CHECKS,
    ResultRecord,
    Status,
    arch_verdict,
    by_architecture,
    statuses_of,
    verdict,
)


class VerdictCounts:
    """Architectures per ``compat.results.verdict`` word (``verdicts``), and the device report read from them."""

    verdicts: Counter

    @property
    def supported(self) -> int:
        """Out of the box: supported, CPU fallback allowed (the headline)."""
        return self.verdicts["supported"] + self.verdicts["supported_with_fallback"]

    @property
    def native(self) -> int:
        """Supported with no op of a support check run on the CPU."""
        return self.verdicts["supported"]

    @property
    def failing(self) -> int:
        return self.verdicts["failing"]


@dataclass
class Coverage(VerdictCounts):
    architectures: int = 0
    verdicts: Counter = field(default_factory=Counter)  # arch_verdict -> count
    per_check: dict[str, Counter] = field(default_factory=dict)  # check -> status -> count
    known_failures: int = 0  # failing records explained by the known-issues file

    def all_checks_pass(self, records: Iterable[ResultRecord]) -> int:
        """Architectures whose every recorded check passed (the cpu self-check's number)."""
        return sum(1 for recs in by_architecture(records).values() if all(r.status == Status.PASS for r in recs))


class ArchChecks(Protocol):
    """An architecture's checks on one device as the counts read them: check -> status, and the checks whose record
    ran an op on the CPU. Records reduce to it (``reduce_records``); the store's roll-up has the same shape."""

    @property
    def statuses(self) -> Mapping[str, str]: ...

    @property
    def fallback_checks(self) -> Collection[str]: ...


@dataclass(frozen=True)
class Checks:
    statuses: dict[str, str]
    fallback_checks: frozenset[str]


def reduce_records(records: Iterable[ResultRecord]) -> dict[str, Checks]:
    """Records by architecture, reduced to ``ArchChecks``."""
    return {name: Checks(statuses_of(recs), frozenset(str(r.check) for r in recs if r.fallback_ops))
            for name, recs in by_architecture(records).items()}


def arch_word(o: ArchChecks | None) -> str:
    """``compat.results.verdict`` of one architecture (None: no records, ``not_judged``); CPU fallback counts on the
    support checks only."""
    if o is None:
        return verdict({})
    return verdict(o.statuses, any(str(c) in o.fallback_checks for c in SUPPORT_CHECKS))


def native_in(o: ArchChecks | None, check: str) -> bool:
    """Passed ``check`` with no op on the CPU: a forward run entirely on the device is a native forward even when
    greedy generate's argmax fell back (issue 18)."""
    return o is not None and o.statuses.get(check) == Status.PASS.value and check not in o.fallback_checks


@dataclass(frozen=True)
class HeadlineCounts(VerdictCounts):
    """The headline's numbers over a catalog: every reader's out of the box, native, failing and per check."""

    total: int
    verdicts: Counter
    passed: dict[str, int]  # check -> architectures whose record passed
    native_passed: dict[str, int]  # check -> architectures whose record passed with no op on the CPU


def headline_counts(outcomes: Mapping[str, ArchChecks], names: Iterable[str], checks: Iterable[str]
                    ) -> HeadlineCounts:
    """Counts over ``names`` (the catalog: an architecture without an outcome is ``not_judged``), per check of
    ``checks``. The one counting rule: ``coverage`` below and the store's headline (``service.headline``) call it."""
    names = list(dict.fromkeys(names))
    checks = [str(c) for c in checks]
    got = [outcomes.get(n) for n in names]
    return HeadlineCounts(
        total=len(names), verdicts=Counter(arch_word(o) for o in got),
        passed={c: sum(1 for o in got if o is not None and o.statuses.get(c) == Status.PASS.value) for c in checks},
        native_passed={c: sum(1 for o in got if native_in(o, c)) for c in checks})


def coverage(records: Iterable[ResultRecord], catalog: Iterable[str] | None = None) -> Coverage:
    """Verdict counts over ``catalog`` (the run's planned architectures: the denominator every reader uses; an
    architecture without records is ``not_judged``), or over the architectures that have records."""
    records = list(records)
    cov = Coverage()
    reduced = reduce_records(records)
    counts = headline_counts(reduced, catalog if catalog is not None else reduced, ())
    cov.architectures = counts.total
    cov.verdicts = counts.verdicts
    for r in records:
        cov.per_check.setdefault(str(r.check), Counter())[str(r.status)] += 1
        if r.known_issue and r.status != Status.PASS:
            cov.known_failures += 1
    return cov


def native_per_check(records: Iterable[ResultRecord], catalog: Iterable[str] | None = None) -> dict[str, int]:
    """Per check (in run order), architectures whose record for it passed with no op on the CPU (``native_in``)."""
    records = list(records)
    reduced = reduce_records(records)
    names = list(catalog) if catalog is not None else list(reduced)
    keep = set(names)
    present = {str(r.check) for r in records if r.architecture in keep}
    return headline_counts(reduced, names, [str(c) for c in ALL_CHECKS if str(c) in present]).native_passed


@dataclass
class FallbackOp:
    op: str  # aten::name
    architectures: list[str]  # supported only through CPU fallback, this op among those that fell back
    offloads: list[str]  # this op is the only one they run on the CPU: implemented natively, they become native

    @property
    def message(self) -> str:
        return (f"implement {self.op} natively to take {len(self.offloads)} architecture(s) off the CPU "
                f"(falls back in {len(self.architectures)})")


def fallback_ranking(records: Iterable[ResultRecord]) -> list[FallbackOp]:
    """Ops that supported architectures ran on the CPU fallback (in a support check), ranked by how many
    architectures implementing each one natively takes off the CPU, then by how many use it, then name."""
    ops_of: dict[str, set[str]] = {}
    for arch, recs in by_architecture(records).items():
        if arch_verdict(recs) == "supported_with_fallback":
            ops_of[arch] = {op_name(op) for r in recs if r.check in SUPPORT_CHECKS for op in r.fallback_ops}
    users: dict[str, set[str]] = defaultdict(set)
    for arch, ops in ops_of.items():
        for op in ops:
            users[op].add(arch)
    out = [FallbackOp(op, sorted(archs), sorted(a for a in archs if ops_of[a] == {op})) for op, archs in users.items()]
    out.sort(key=lambda f: (-len(f.offloads), -len(f.architectures), f.op))
    return out
