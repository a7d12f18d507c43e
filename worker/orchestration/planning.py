"""What a run will do before it starts: the plan of a sweep (device identity and versions, entries, checks) and the
nightly's plan from the settings (the configured catalog on the configured device).

The device is resolved here, at the plan's edge, once; the plan then carries its identity to every executor.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from compat.results import NIGHTLY_CHECKS, ArchitectureEntry, Check, RunInfo, Scope, Trigger
from compat.settings import Settings, get_settings
from worker.catalog.catalog import CatalogError
from worker.catalog.load import load_catalog, refresh_snapshot
from worker.orchestration.executors import SweepPlan
from worker.run.process.determinants import run_determinants
from worker.run.process.devices import Device, device_versions, resolve_device


def make_plan(entries: list[ArchitectureEntry], device: Device, checks: list[Check], *, trigger: Trigger,
              database_url: str, workdir: Path, seed: int = 0, catalog_source: str = "registry",
              snapshot_id: str | None = None, scope: Scope = Scope.FULL, rerun_of: str | None = None) -> SweepPlan:
    """A plan whose run carries the device's identity, versions and determinants, as the in-process sweep records
    them (the workers are expected to match: they are the cluster's, configured alike)."""
    run = RunInfo(trigger=trigger, device=device.info, versions=device_versions(device),
                  catalog_source=catalog_source, snapshot_id=snapshot_id, scope=scope, checks=list(checks),
                  determinants=run_determinants(device), rerun_of=rerun_of,
                  lane=get_settings().lane)
    return SweepPlan(run=run, entries=entries, checks=list(checks), database_url=database_url, workdir=workdir,
                     seed=seed)


log = logging.getLogger(__name__)


def refresh_catalog(settings: Settings) -> str | None:
    """Before a nightly on the ``auto`` source: list the Hub again and save the snapshot, so the nightly measures
    the real top N. Where the network does not allow it (or ``HF_HUB_OFFLINE`` is set) the failure is logged and the
    stored snapshot (else the registry) is swept. ``snapshot`` and ``registry`` sources are used as configured.
    Returns the new snapshot id, or None."""
    if settings.catalog_source != "auto" or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return None
    try:
        return refresh_snapshot(path=settings.snapshot_path).snapshot_id
    except (CatalogError, OSError) as exc:
        log.warning("catalog refresh failed, sweeping the stored catalog instead: %s", exc)
        return None


def nightly_plan(settings: Settings) -> SweepPlan:
    """The nightly sweep: the configured catalog (refreshed from the Hub first where it can be, ``refresh_catalog``)
    on the configured device, the nightly checks (the default four and the fine-tuning ones: ``NIGHTLY_CHECKS``),
    trigger ``nightly``."""
    refresh_catalog(settings)
    catalog = load_catalog(settings.catalog_source, settings=settings)
    return make_plan(catalog.entries, resolve_device(settings.device), list(NIGHTLY_CHECKS),
                     trigger=Trigger.NIGHTLY, database_url=settings.database_url, workdir=settings.var_dir / "work",
                     seed=settings.seed, catalog_source=catalog.source, snapshot_id=catalog.snapshot_id)
