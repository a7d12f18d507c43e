"""Which re-runs the decisions phase needs: per measured plan (one switch, or several together) and per architecture it
looks at, whether a re-run can change the architecture's verdict, and which re-run answers it. Pure rules.

The rule (``needs``): a re-run switch can change an architecture's support checks only if the ops those checks run
touch it. Those ops are the CPU reference's forward and generate parts (``OpTrace.support_ops``; where the sweep did
not record them, the whole trace, forward, generate and train, as before) plus the support records' own ops (fallback,
blocking). A plan's verdict for an architecture is then:

- no re-run switch of the plan touches it: its stored records, re-judged for the plan's fallback-only ("traces")
  switches (``compat.decisions.rejudge_fallback``; with none, its stored verdict);
- the touching re-run switches cannot move it (``cannot_move``): its support checks never reached the device (its
  load check, the first, ended at the build or the CPU reference), or every touching switch is strict (its option
  only makes ops fail that ran: it never lets a failing op run nor changes what a running op computes) and the
  architecture is already failing (its first failure stays, or an earlier one comes), or every touching switch is
  permissive and names its ops (its option only lets ops of those names run that failed, or moves them between the
  device and the CPU fallback, which computes the same) and one support check ended with the device refusing an op
  none of them names, none of them on the CPU fallback before it (everything before that op ran the same, so the
  check still stops there and the architecture stays failing: MoE models refused at integer sort before
  ``_grouped_mm`` is reached): its stored records;
- otherwise: the re-run with exactly the touching re-run switches set, re-judged for the plan's fallback-only
  switches. A combination whose switches each touch different architectures is thereby the union of its singles,
  measured once; an architecture two re-run switches of the combination touch (a failure behind another, MoE's
  integer sort then ``_grouped_mm``) gets a re-run of its own with both set.

This is exact under the contracts the old full re-run already relied on: a switch whose ops an architecture's
support checks never run cannot move it (the old rule looked only at the architectures a switch touches), a "traces"
switch only moves its op between the device and the CPU fallback (its declared measure), and a "strict" switch's
other option only lets less run (how the range's strict end is measured).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from compat.decisions import affected, touches
from compat.ops import op_name
from compat.results import SUPPORT_CHECKS, Check, ResultRecord, Status, arch_verdict, by_architecture

Plan = Mapping[str, str]  # switch id -> the option measured
# A support check that ended at the device refusing one op: everything before that op ran (a first failure).
REFUSALS = frozenset({Status.UNSUPPORTED_OP, Status.UNSUPPORTED_DTYPE})


@dataclass(frozen=True)
class Need:
    """One re-run: an architecture with these switches set (id -> option), every other switch at its default."""

    architecture: str
    switches: tuple[tuple[str, str], ...]  # sorted

    @property
    def chosen(self) -> dict[str, str]:
        return dict(self.switches)


@dataclass
class PlanWork:
    """How one plan is measured: the architectures looked at (as before: any op of theirs the plan's switches
    decide), which of them a re-run answers (architecture -> the re-run), and how it is labelled."""

    plan: dict[str, str]
    looked: list[str]
    measured_by: str  # "rerun" when a re-run switch touches any looked-at architecture, else "traces"
    reruns: dict[str, Need] = field(default_factory=dict)  # the rest: stored records, re-judged for traces switches
    traces_switches: list[str] = field(default_factory=list)  # ids of the plan's fallback-only switches


def support_ops(arch: str, traces: Mapping[str, Sequence[str]], support_traces: Mapping[str, Sequence[str] | None],
                records: Iterable[ResultRecord]) -> list[str]:
    """The ops ``arch``'s support checks can run: its CPU reference's forward and generate ops where the sweep
    recorded them (``support_traces``), else its whole trace; plus its support records' fallback and blocking ops."""
    recorded = support_traces.get(arch)
    ops = list(recorded if recorded is not None else traces.get(arch, []))
    for r in records:
        if r.architecture == arch and r.check in SUPPORT_CHECKS:
            ops += [*r.fallback_ops, *([r.blocking_op] if r.blocking_op else [])]
    return ops


def cannot_move(hit: Sequence[Mapping], records: Sequence[ResultRecord]) -> bool:
    """Whether setting the re-run switches ``hit`` (each touching the architecture) cannot change the verdict of the
    architecture whose support records are ``records`` (see the module's rule; conservative: False when unsure)."""
    support = [r for r in records if r.check in SUPPORT_CHECKS]
    first = next((r for r in support if r.check == Check.LOAD), None)
    if first is not None and first.status in (Status.REFERENCE_FAIL, Status.SKIPPED):
        return True  # the device ran no support check: the build or the CPU reference stopped it
    if hit and all(sw.get("other_option") == "strict" for sw in hit):
        return arch_verdict(support) == "failing"
    if hit and all(sw.get("other_option") == "permissive" and sw.get("ops") for sw in hit):
        decided = {op for sw in hit for op in sw["ops"]}
        # Conservative: an op of theirs that the CPU fallback ran before the refusal may run on the device instead.
        return any(r.status in REFUSALS and r.blocking_op and op_name(r.blocking_op) not in decided
                   and not any(op_name(f) in decided for f in r.fallback_ops) for r in support)
    return False


def needs(plans: Sequence[Plan], switches: Mapping[str, Mapping], traces: Mapping[str, Sequence[str]],
          support_traces: Mapping[str, Sequence[str] | None], records: Sequence[ResultRecord],
          measurable: Iterable[str]) -> list[PlanWork]:
    """Every plan's work (see the module's rule). ``switches``: id -> the device's switch (``ops``, ``dtypes``,
    ``measure``); ``measurable``: the architectures a re-run may run (not remote code). Reproducible: sorted."""
    allowed = set(measurable)
    records = [r for r in records if r.check in SUPPORT_CHECKS]
    touched = {sid: [a for a in affected(sw, traces, records) if a in allowed] for sid, sw in switches.items()}
    ops_of = {a: support_ops(a, traces, support_traces, records) for sids in touched.values() for a in sids}
    by_arch = by_architecture(records)
    out = []
    for plan in plans:
        rerun_ids = sorted(sid for sid in plan if switches[sid]["measure"] == "rerun")
        trace_ids = sorted(sid for sid in plan if switches[sid]["measure"] != "rerun")
        rerun_looked = sorted({a for sid in rerun_ids for a in touched[sid]})
        looked = sorted(set(rerun_looked) | {a for sid in trace_ids for a in touched[sid]})
        work = PlanWork(dict(plan), looked, "rerun" if rerun_looked else "traces", traces_switches=trace_ids)
        for arch in rerun_looked:
            hit = tuple((sid, plan[sid]) for sid in rerun_ids if touches(switches[sid], ops_of[arch]))
            if hit and not cannot_move([switches[sid] for sid, _ in hit], by_arch.get(arch, [])):
                work.reruns[arch] = Need(arch, hit)
        out.append(work)
    return out


def distinct_reruns(work: Iterable[PlanWork]) -> list[Need]:
    """Each re-run once, however many plans read it (a single and the combinations holding it), in a stable order."""
    seen = {need for w in work for need in w.reruns.values()}
    return sorted(seen, key=lambda n: (n.switches, n.architecture))
