"""Blocker chains and what implementing ops unlocks: the one rule behind ``compat blockers``, ``GET /api/v1/blockers``
and the Op blockers page.

An architecture's chain is the ops it fails at, in the order the device meets them: its blocking op
(``compat.blocking``), then, re-run with that op moved to the CPU fallback, the next one, until it passes or meets a
failure that names no op (worker/orchestration/chains.py measures it on the simulated device). "Implement X to unlock
N" counts only the architectures whose whole chain is {X} and ends in a pass; chains that share ops are ranked as
sets ("aten::sort + aten::_grouped_mm unlock 51"). Where no chain was measured (a device that cannot move an op to the
CPU: a real device, ``cpu``; or a run without the measurement) only the first blocker is known, and unlocks are
unknown (None), never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, Field

from compat.blocking import blocking_record
from compat.ops import op_name
from compat.results import SUPPORT_CHECKS, ResultRecord, Status, arch_verdict

MAX_LINKS = 4  # ops per chain at most: an architecture is re-run at most MAX_LINKS - 1 times


class ChainEnd(StrEnum):
    """How a chain ends."""

    PASS = "pass"  # supported once the chain's ops run on the CPU fallback
    FAILURE = "failure"  # then a failure that names no op (``detail`` says which)
    NO_VERDICT = "no_verdict"  # the re-run gave no verdict (reference_fail, harness_error, a check not run)
    STUCK = "stuck"  # the op still failed with it moved to the CPU fallback: it cannot be moved there
    CAPPED = "capped"  # MAX_LINKS ops met and still failing at the last: what lies behind it is not measured
    UNKNOWN = "unknown"  # only the first blocker is known: the device cannot move an op to the CPU


class Link(BaseModel):
    """One op of a chain, where it was met."""

    op: str  # spelled with its dtypes, e.g. "aten::sort (Int)"
    check: str
    status: str


class Chain(BaseModel):
    """One architecture's blockers on one device, in order, and how the chain ends."""

    architecture: str
    device: str
    links: list[Link] = Field(default_factory=list)
    end: ChainEnd = ChainEnd.UNKNOWN
    detail: str = ""  # the failure or no-verdict that ends it, e.g. "forward mismatch"

    @property
    def ops(self) -> list[str]:
        """The op names, in order, each once."""
        return list(dict.fromkeys(op_name(link.op) for link in self.links))

    def text(self) -> str:
        """``aten::sort (Int) → aten::_grouped_mm (Float, Int) → pass``: the chain in one line, everywhere."""
        tail = {ChainEnd.PASS: "pass", ChainEnd.UNKNOWN: "? (only the first blocker is known)",
                ChainEnd.CAPPED: f"? (capped at {MAX_LINKS} ops)",
                ChainEnd.STUCK: "still fails with it on the CPU"}.get(self.end, self.detail or str(self.end))
        return " → ".join([*(link.op for link in self.links), tail])


def _support(records: Iterable[ResultRecord]) -> list[ResultRecord]:
    return [r for r in records if r.check in SUPPORT_CHECKS]


def first_link(records: Sequence[ResultRecord]) -> Chain | None:
    """The chain's start from an architecture's records: its blocking op (``compat.blocking``, support checks),
    end UNKNOWN; None when it is not failing at an op (supported, no verdict, or a failure naming no op)."""
    recs = _support(records)
    found = blocking_record(recs)
    if found is None or not found.blocking_op or arch_verdict(recs) != "failing":
        return None
    return Chain(architecture=found.architecture, device=found.device,
                 links=[Link(op=found.blocking_op, check=str(found.check), status=str(found.status))])


def extend(chain: Chain, rerun: Sequence[ResultRecord], *, max_links: int = MAX_LINKS) -> Chain:
    """The chain after a re-run of its architecture with every op of ``chain`` on the CPU fallback: closed (pass,
    a failure naming no op, no verdict, stuck, capped) or one link longer, still open (end UNKNOWN)."""
    recs = _support(rerun)
    verdict = arch_verdict(recs)
    found = blocking_record(recs)
    if verdict in ("supported", "supported_with_fallback"):
        return chain.model_copy(update={"end": ChainEnd.PASS})
    if found is None:
        reasons = sorted({f"{r.check} {r.status}" for r in recs if r.status != Status.PASS}) or [verdict]
        return chain.model_copy(update={"end": ChainEnd.NO_VERDICT, "detail": ", ".join(reasons)})
    if not found.blocking_op:
        what = f"{found.check} {found.status}" + (f" ({found.error.type})" if found.error else "")
        return chain.model_copy(update={"end": ChainEnd.FAILURE, "detail": what})
    link = Link(op=found.blocking_op, check=str(found.check), status=str(found.status))
    if op_name(found.blocking_op) in chain.ops:
        return chain.model_copy(update={"end": ChainEnd.STUCK, "detail": f"{found.blocking_op} again"})
    longer = chain.model_copy(update={"links": [*chain.links, link]})
    return longer.model_copy(update={"end": ChainEnd.CAPPED}) if len(longer.links) >= max_links else longer


@dataclass
class Blocker:
    """One op: the architectures whose chain holds it, those it blocks first, and those implementing it alone
    unlocks (None: not known, only first blockers were measured)."""

    op: str  # aten::name (dtype spellings in ``variants``)
    architectures: list[str]  # its chain holds this op
    first: list[str]  # this op is their first blocker
    unlocks: list[str] | None  # whole chain is {op} and ends in a pass; None where chains were not measured
    variants: list[str]  # e.g. ["aten::sort (Int)"]
    checks: list[str]  # where it was met

    @property
    def message(self) -> str:
        if self.unlocks is None:
            return (f"{self.op} blocks {len(self.architectures)} architecture(s) first; what they meet behind it is "
                    f"not measured (only the first blocker is known), so what implementing it unlocks is unknown")
        return (f"implement {self.op} to unlock {len(self.unlocks)} architecture(s) "
                f"(in the chain of {len(self.architectures)})")


@dataclass
class UnlockSet:
    """Ops that together unlock architectures: each listed architecture's whole chain is exactly these ops."""

    ops: list[str]  # in chain order
    architectures: list[str]

    @property
    def message(self) -> str:
        return f"implement {' + '.join(self.ops)} to unlock {len(self.architectures)} architecture(s)"


@dataclass
class BlockerReport:
    """Every reader's blockers: per op, per set of ops, and each architecture's chain."""

    blockers: list[Blocker]
    unlock_sets: list[UnlockSet]
    chains: list[Chain]
    measured: bool  # chains measured by moving ops to the CPU (else only first blockers are known)
    capped: list[str] = field(default_factory=list)  # architectures whose chain hit MAX_LINKS

    @property
    def note(self) -> str:
        if not self.chains:
            return "no blocking ops: nothing failed on an identifiable op"
        if not self.measured:
            return ("only the first blocker is known: this device cannot move an op to the CPU fallback (or the run "
                    "did not measure chains), so what lies behind each blocker, and what implementing it unlocks, "
                    "is unknown")
        text = (f"chains measured: each architecture re-run with its blocking ops moved to the CPU fallback, at most "
                f"{MAX_LINKS} ops; \"unlock\" counts architectures whose whole chain is that set of ops")
        if self.capped:
            text += f"; capped (more may follow): {', '.join(self.capped)}"
        return text


def chains_of(records: Iterable[ResultRecord], measured: Iterable[Chain] | None) -> tuple[list[Chain], bool]:
    """Each architecture failing at an op with its chain: the measured one where ``measured`` has it, else its
    first link only (UNKNOWN). The bool: whether every chain was measured."""
    stored = {(c.architecture, c.device): c for c in measured or []}
    per_key: dict[tuple[str, str], list[ResultRecord]] = defaultdict(list)
    for r in records:
        per_key[(r.architecture, r.device)].append(r)
    out = []
    for recs in per_key.values():
        start = first_link(recs)
        if start is None:
            continue
        out.append(stored.get((start.architecture, start.device), start))
    out.sort(key=lambda c: (c.architecture, c.device))
    return out, bool(out) and all(c.end != ChainEnd.UNKNOWN for c in out)


def rank(chains: Iterable[Chain]) -> BlockerReport:
    """Ops ranked by the architectures whose chain holds them (then by what they unlock alone, then name), and
    sets of ops ranked by the architectures they unlock together (then fewer ops first)."""
    chains = list(chains)
    measured = bool(chains) and all(c.end != ChainEnd.UNKNOWN for c in chains)
    holds: dict[str, set[str]] = defaultdict(set)
    first: dict[str, set[str]] = defaultdict(set)
    variants: dict[str, set[str]] = defaultdict(set)
    checks: dict[str, set[str]] = defaultdict(set)
    sets: dict[frozenset[str], tuple[list[str], set[str]]] = {}
    unknown: set[str] = set()  # ops some chain holding them was not measured past: what they unlock is unknown
    for c in chains:
        for i, link in enumerate(c.links):
            name = op_name(link.op)
            holds[name].add(c.architecture)
            if c.end == ChainEnd.UNKNOWN:
                unknown.add(name)
            variants[name].add(link.op)
            checks[name].add(link.check)
            if i == 0:
                first[name].add(c.architecture)
        if c.end == ChainEnd.PASS:
            sets.setdefault(frozenset(c.ops), (c.ops, set()))[1].add(c.architecture)
    alone = {next(iter(k)): archs for k, (_ops, archs) in sets.items() if len(k) == 1}
    blockers = [Blocker(op, sorted(archs), sorted(first[op]),
                        None if op in unknown else sorted(alone.get(op, ())), sorted(variants[op]), sorted(checks[op]))
                for op, archs in holds.items()]
    blockers.sort(key=lambda b: (-len(b.architectures), -len(b.unlocks or ()), b.op))
    unlock_sets = [UnlockSet(ops, sorted(archs)) for ops, archs in sets.values()]
    unlock_sets.sort(key=lambda u: (-len(u.architectures), len(u.ops), u.ops))
    capped = sorted({c.architecture for c in chains if c.end == ChainEnd.CAPPED})
    return BlockerReport(blockers, unlock_sets, chains, measured, capped)


def blocker_report(records: Iterable[ResultRecord], measured: Iterable[Chain] | None = None) -> BlockerReport:
    """``rank`` over the chains of ``records`` (a run's, or several devices' runs'): the one function the CLI, the
    API and the pages call."""
    return rank(chains_of(records, measured)[0])
