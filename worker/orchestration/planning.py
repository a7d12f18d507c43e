"""What a run will do before it starts: the plan of a sweep (device identity and versions, entries, checks) and the
nightly's plan from the settings (the configured catalog on the configured device).

The device is resolved here, at the plan's edge, once; the plan then carries its identity to every executor.
"""

from __future__ import annotations

from pathlib import Path

from compat.results import NIGHTLY_CHECKS, ArchitectureEntry, Check, RunInfo, Trigger
from compat.settings import Settings
from worker.catalog.load import load_catalog
from worker.orchestration.executors import SweepPlan
from worker.run.devices import Device, device_versions, resolve_device


def make_plan(entries: list[ArchitectureEntry], device: Device, checks: list[Check], *, trigger: Trigger,
              database_url: str, workdir: Path, seed: int = 0, catalog_source: str = "registry",
              snapshot_id: str | None = None) -> SweepPlan:
    """A plan whose run carries the device's identity and versions, as the in-process sweep records them."""
    run = RunInfo(trigger=trigger, device=device.info, versions=device_versions(device),
                  catalog_source=catalog_source, snapshot_id=snapshot_id, checks=list(checks))
    return SweepPlan(run=run, entries=entries, checks=list(checks), database_url=database_url, workdir=workdir,
                     seed=seed)


def nightly_plan(settings: Settings) -> SweepPlan:
    """The nightly sweep: the configured catalog on the configured device, the nightly checks (the default four
    and the fine-tuning ones: ``NIGHTLY_CHECKS``), trigger ``nightly``."""
    catalog = load_catalog(settings.catalog_source, settings=settings)
    return make_plan(catalog.entries, resolve_device(settings.device), list(NIGHTLY_CHECKS),
                     trigger=Trigger.NIGHTLY, database_url=settings.database_url, workdir=settings.var_dir / "work",
                     seed=settings.seed, catalog_source=catalog.source, snapshot_id=catalog.snapshot_id)
