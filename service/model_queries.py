"""Per-model reads over ``catalog_models`` (written by ``service.model_store``): answer a lookup, list a catalog's
models, and the per-model headline. The rules are ``compat.model_rows``; CLI, API and pages call these.

No torch and no Alembic here: ``compat lookup`` and ``GET /api/v1/models/{org}/{name}`` read the store only.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from compat.model_rows import (
    ModelAnswer,
    ModelCheck,
    ModelHeadline,
    differs_in,
    model_headline,
    model_verdict,
)
from compat.results import ResultRecord, arch_verdict, statuses_of, used_fallback
from service import runs
from service.models import CatalogModel, Result
from service.records import row_to_record

JUDGED = "judged with its own config"
NOT_RUN = "the architecture's verdict: this model's own config was not run"
SUBMIT_HINT = ("submit it: POST /api/v1/submissions with {\"model_id\": ORG/NAME} (a bearer token), the Submit page, "
               "or `compat sweep --models` after `compat catalog refresh`")


def _records(session: Session, row: CatalogModel) -> list[ResultRecord]:
    if not row.run_id or not row.judged_as:
        return []
    rows = session.scalars(select(Result).where(Result.run_id == row.run_id, Result.architecture == row.judged_as,
                                                Result.device == row.device).order_by(Result.id))
    return [row_to_record(r) for r in rows]


def _checks(records: list[ResultRecord]) -> dict[str, ModelCheck]:
    return {str(r.check): ModelCheck(status=str(r.status), blocking_op=r.blocking_op,
                                     reason=r.reason or (r.error.message[:300] if r.error else None))
            for r in records}


def _find(session: Session, model_id: str, device: str | None) -> CatalogModel | None:
    q = select(CatalogModel).where(func.lower(CatalogModel.model_id) == model_id.lower())
    if device:
        q = q.where(CatalogModel.device == device)
    return session.scalars(q.order_by(CatalogModel.updated.desc())).first()


def answer_row(session: Session, row: CatalogModel) -> ModelAnswer:
    """A stored model's answer: its own run's checks and verdict, its plan."""
    records = _records(session, row)
    verdict = model_verdict(statuses_of(records), used_fallback(records), row.refusal)
    basis = f"refused: {row.refusal}" if row.refusal else JUDGED if records else "not judged yet"
    return ModelAnswer(model_id=row.model_id, architecture=row.architecture, verdict=verdict,
                       checks=_checks(records), plan=row.plan, basis=basis, sha=row.sha, catalog=row.catalog,
                       device=row.device, run_id=row.run_id, refusal=row.refusal)


def lookup(session: Session, model_id: str, device: str | None = None,
           config: dict | None = None) -> ModelAnswer | None:
    """The answer for ``model_id``: its stored row; else, given its ``config`` (read from the Hub by the caller),
    the verdict of its architecture where that was swept, plus what its config differs in from the judged model
    of that architecture; None when neither is known."""
    row = _find(session, model_id, device)
    if row is not None:
        return answer_row(session, row)
    if not config:
        return None
    arch = (config.get("architectures") or [None])[0]
    if not isinstance(arch, str):
        return None
    peer = session.scalars(select(CatalogModel).where(
        (CatalogModel.architecture == arch) | (CatalogModel.judged_as == arch),
        CatalogModel.run_id.is_not(None)).order_by(CatalogModel.updated.desc())).first()
    # The class verdict (the architecture's latest class run); where the class was never swept, the peer model's own.
    records = runs.latest_results_in(session, peer.judged_as if peer else arch, device)
    if records:
        dev = records[0].device
        records = [r for r in records if r.device == dev]
    elif peer is not None:
        records, dev = _records(session, peer), peer.device
    if not records:
        return None
    return ModelAnswer(model_id=model_id, architecture=arch, verdict=arch_verdict(records), checks=_checks(records),
                       plan=None, basis=NOT_RUN, device=dev,
                       differs_in=differs_in(config, peer.config or {}) if peer else [])


def list_models(session: Session, device: str | None = None) -> list[tuple[CatalogModel, ModelAnswer]]:
    """Every stored model of ``device`` (default: the device with the most recent rows) with its answer."""
    if device is None:
        device = session.scalars(select(CatalogModel.device).order_by(CatalogModel.updated.desc())).first()
        if device is None:
            return []
    rows = session.scalars(select(CatalogModel).where(CatalogModel.device == device)
                           .order_by(CatalogModel.architecture, CatalogModel.model_id)).all()
    return [(r, answer_row(session, r)) for r in rows]


def headline(session: Session, device: str | None = None) -> ModelHeadline | None:
    """The per-model headline over the stored catalog of ``device``: the same text on the CLI, API and pages."""
    pairs = list_models(session, device)
    if not pairs:
        return None
    catalogs = sorted({r.catalog for r, _ in pairs})
    when = max(r.updated for r, _ in pairs)
    return model_headline(((a.verdict, a.plan) for _, a in pairs), "; ".join(catalogs),
                          when.date().isoformat() if when else None)
