"""The blockers read: ``compat.chains.blocker_report`` over one or more runs (their records and measured chains),
with ``compat.coverage.fallback_ranking``, shaped for the API, the pages and ``compat blockers``.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from compat.chains import BlockerReport, Chain, blocker_report
from compat.coverage import fallback_ranking
from service import schemas_blockers as SB
from service.models import Run
from service.rollup import run_view
from service.runs import run_records

_BIG = 10**9  # an architecture without a rank sorts last


def blockers_out(session: Session, runs: list[Run], device: str | None, run_id: str | None) -> SB.Blockers:
    """The blockers of ``runs`` together: one report over every run's records and chains (a run without measured
    chains gives first blockers only), ops on the CPU merged by op."""
    ranks: dict[str, int] = {}
    records = []
    measured: list[Chain] = []
    on_cpu: dict[str, SB.FallbackOp] = {}
    for run in runs:
        view = run_view(session, run)
        ranks.update({c.architecture: c.rank for c in view.catalog if c.architecture not in ranks})
        recs = run_records(session, run.id)
        records.extend(recs)
        measured.extend(Chain(**c) for c in run.chains or [])
        for f in fallback_ranking(recs):
            item = on_cpu.setdefault(f.op, SB.FallbackOp(op=f.op, count=0, architectures=[]))
            item.architectures = sorted(set(item.architectures) | set(f.architectures))
            item.offloads = sorted(set(item.offloads) | set(f.offloads))
            item.count = len(item.architectures)
    fallback = sorted(on_cpu.values(), key=lambda f: (-len(f.offloads), -f.count, f.op))
    return to_schema(blocker_report(records, measured), fallback, ranks, device, run_id)


def to_schema(report: BlockerReport, fallback: list[SB.FallbackOp], ranks: dict[str, int], device: str | None,
              run_id: str | None) -> SB.Blockers:
    """``report`` as the API's ``Blockers``, architectures by ``ranks`` (the CLI's JSON-report read shares it)."""

    def by_rank(names: list[str]) -> list[str]:
        return sorted(names, key=lambda n: (ranks.get(n, _BIG), n))

    items = []
    for b in report.blockers:
        best = min((ranks.get(n, _BIG) for n in b.architectures), default=_BIG)
        items.append(SB.Blocker(op=b.op, count=len(b.architectures), architectures=by_rank(b.architectures),
                               first=by_rank(b.first), unlocks=None if b.unlocks is None else by_rank(b.unlocks),
                               variants=b.variants, checks=b.checks, best_rank=best if best < _BIG else None,
                               message=b.message))
    chains = [SB.ChainOut(architecture=c.architecture, device=c.device, rank=ranks.get(c.architecture),
                         links=[SB.ChainLink(**link.model_dump()) for link in c.links], ops=c.ops, end=str(c.end),
                         detail=c.detail, text=c.text())
              for c in sorted(report.chains, key=lambda c: (ranks.get(c.architecture, _BIG), c.architecture))]
    sets = [SB.UnlockSetOut(ops=u.ops, count=len(u.architectures), architectures=by_rank(u.architectures),
                           message=u.message) for u in report.unlock_sets]
    return SB.Blockers(device=device, run_id=run_id, items=items, fallback=fallback, unlock_sets=sets, chains=chains,
                      measured=report.measured, note=report.note)
