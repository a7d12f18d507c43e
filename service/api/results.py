"""Read endpoints over stored results: coverage, devices, architectures, runs, diff, blockers, declared lists.

Each handler validates its parameters and delegates to ``service.queries``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from sqlalchemy.orm import Session

from compat.results import Check, RunKind, Trigger
from service import queries
from service import schemas as S
from service import schemas_blockers as SB
from service.api.deps import READ_ERRORS, reject_unknown_query
from service.deps import get_session

router = APIRouter(dependencies=[Depends(reject_unknown_query)], responses=READ_ERRORS)

NAME = r"^[A-Za-z0-9_.\-]+$"  # device names, run ids, class names: no control chars or spaces
# A device name, or its identity with profile and/or strict (compat.identity): "neuron (trn3)", "neuron (trn2, strict)".
DEVICE = r"^[A-Za-z0-9_.:\-]+(?: \((?:[A-Za-z0-9_.\-]+(?:, strict)?|strict)\))?$"
Device = Annotated[str | None, Query(min_length=1, max_length=96, pattern=DEVICE,
                                     description="device name, or identity: 'neuron (trn3)'")]
RunId = Annotated[str | None, Query(min_length=1, max_length=64, pattern=NAME, description="run id")]
TopN = Annotated[int | None, Query(ge=1, le=100_000, description="only the N best-ranked architectures")]
Page = Annotated[int, Query(ge=1, le=1_000_000)]
MAX_PER_PAGE = 500
PerPage = Annotated[int, Query(ge=1, le=MAX_PER_PAGE)]
SessionDep = Annotated[Session, Depends(get_session)]


@router.get("/coverage", response_model=S.Coverage, summary="Coverage headline per device (latest run or one run)")
def coverage(session: SessionDep, device: Device = None, run_id: RunId = None, top_n: TopN = None) -> S.Coverage:
    return queries.coverage(session, device=device, run_id=run_id, top_n=top_n)


@router.get("/coverage/history", response_model=S.CoverageHistory, summary="Supported/total of every run of a device")
def coverage_history(session: SessionDep,
                     device: Annotated[str, Query(min_length=1, max_length=96, pattern=DEVICE)]) -> S.CoverageHistory:
    return queries.coverage_history(session, device)


@router.get("/coverage/declared", response_model=S.DeclaredCoverage,
            summary="Declared support lists (declared, not measured) next to measured devices over the top-N")
def declared(session: SessionDep, top_n: TopN = None) -> S.DeclaredCoverage:
    return queries.declared_coverage(session, top_n=top_n)


@router.get("/devices", response_model=list[S.DeviceOut])
def devices(session: SessionDep) -> list[S.DeviceOut]:
    return queries.list_devices(session)


@router.get("/architectures", response_model=S.ArchitecturePage, summary="Architectures by rank, filtered, paginated")
def architectures(session: SessionDep, status: queries.StatusFilter | None = None, check: Check | None = None,
                  device: Device = None, q: Annotated[str | None, Query(max_length=128, pattern=r"^[^\x00-\x1f]*$")] = None,
                  page: Page = 1, per_page: PerPage = 50) -> S.ArchitecturePage:
    return queries.list_architectures(session, status=status, check=check, device=device, q=q, page=page,
                                      per_page=per_page)


@router.get("/architectures/{name}", response_model=S.ArchitectureDetail)
def architecture(session: SessionDep,
                 name: Annotated[str, Path(max_length=128, pattern=NAME)]) -> S.ArchitectureDetail:
    return queries.architecture_detail(session, name)


@router.get("/runs", response_model=S.RunPage)
def runs(session: SessionDep, device: Device = None, trigger: Trigger | None = None,
         state: Annotated[str | None, Query(pattern="^(running|complete|incomplete)$")] = None,
         kind: Annotated[RunKind | None, Query(description="sweep (the catalog) or submission (one config); "
                                                            "default both")] = None,
         page: Page = 1, per_page: PerPage = 50) -> S.RunPage:
    return queries.list_runs(session, device=device, trigger=trigger, state=state, kind=kind, page=page,
                             per_page=per_page)


@router.get("/runs/{run_id}", response_model=S.RunDetail)
def run(session: SessionDep, run_id: Annotated[str, Path(max_length=64, pattern=NAME)],
        results: bool = True) -> S.RunDetail:
    return queries.get_run(session, run_id, with_results=results)


@router.get("/diff", response_model=S.ArchitectureDiff, summary="Regressions, fixes, new and removed from run a to run b")
def diff(session: SessionDep, a: Annotated[str, Query(max_length=64, pattern=NAME)],
         b: Annotated[str, Query(max_length=64, pattern=NAME)]) -> S.ArchitectureDiff:
    return queries.diff_runs(session, a, b)


@router.get("/blockers", response_model=SB.Blockers, summary="Ops ranked by the architectures they block")
def blockers(session: SessionDep, device: Device = None, run_id: RunId = None) -> SB.Blockers:
    return queries.blockers(session, device=device, run_id=run_id)
