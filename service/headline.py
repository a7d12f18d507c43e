"""One run's headline read (``GET /api/v1/coverage``, the overview): out of the box, native, failing, per check with
its native count, and the range across the run's measured decisions, all by the pure rules of ``compat``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from compat.coverage import headline_counts
from compat.decisions import DecisionEffect, HeadlineRange, headline_range, restrict
from compat.results import headline_label, is_ranked, percent
from service import schemas as S
from service.models import Run
from service.records import aware
from service.rollup import run_view
from service.runs import run_scope_label


def frac(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def decision_range(decisions: Iterable[dict] | None, names: list[str], supported: int
                   ) -> tuple[HeadlineRange, list[S.DecisionOut]]:
    """The headline's range over ``names`` (a top-N counts only its own architectures) and each effect as shown."""
    effects = [restrict(DecisionEffect(**d), names) for d in decisions or []]
    rng = headline_range(supported, len(names), effects)
    out = [S.DecisionOut(key=e.key, switches=e.switches, subject=e.subject, confidence=e.confidence,
                         sources=e.sources, measured_by=e.measured_by, affected=len(e.affected), moves=e.moves,
                         native_moves=e.native_moves, gains=e.gains, losses=e.losses, native_gains=e.native_gains,
                         native_losses=e.native_losses, unmeasured=e.unmeasured) for e in effects]
    return rng, out


def device_coverage(session: Session, run: Run, top_n: int | None) -> S.DeviceCoverage:
    """The headline of ``run`` over its catalog, or its top N when the catalog is ranked."""
    view = run_view(session, run)
    outcomes = view.outcomes
    ranked = is_ranked(run.catalog_source)
    top_n = top_n if ranked else None  # an unranked catalog has no "top N"
    catalog = view.catalog[:top_n] if top_n is not None else view.catalog
    names = [c.architecture for c in catalog]
    total = len(names)
    counts = headline_counts(outcomes, names, run.checks or [])
    per_check = [S.CheckCoverage(check=check, passed=counts.passed[check], total=total,
                                 fraction=frac(counts.passed[check], total), headline=headline_label(check),
                                 native=counts.native_passed[check]) for check in counts.passed]
    supported, native = counts.supported, counts.native
    rng, decisions = decision_range(run.decisions, names, supported)
    return S.DeviceCoverage(
        device=run.identity or run.device, run_id=run.id, run_started=aware(run.started), run_state=run.state,
        simulated=bool((run.device_info or {}).get("simulated", False)), top_n=top_n, total=total,
        supported=supported, fraction=frac(supported, total), percent=percent(supported, total),
        supported_with_fallback=supported - native, per_check=per_check, native=native,
        native_percent=percent(native, total), profile=run.profile, strict=bool(run.strict),
        failing=counts.failing,
        range_low=rng.low, range_high=rng.high, range_text=rng.text(), decisions=decisions,
        catalog_source=run.catalog_source, snapshot_id=run.snapshot_id, scope=run.scope, ranked=ranked,
        scope_label=run_scope_label(run, len(view.catalog)),
    )
