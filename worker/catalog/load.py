"""Loading the catalog from one of its sources: the registry, the saved snapshot, or a live Hub listing; and
refreshing the snapshot from the Hub (``compat catalog refresh``)."""

from __future__ import annotations

from pathlib import Path

from compat.settings import Settings, get_settings
from worker.catalog.catalog import (
    Catalog,
    CatalogError,
    Progress,
    read_snapshot,
    registry_entries,
    write_snapshot,
)
from worker.catalog.hub import hub_catalog, resolve_endpoint

SOURCES = ("hub", "snapshot", "registry", "auto")  # auto = snapshot if the snapshot file exists else registry


def _limited(catalog: Catalog, limit: int | None) -> Catalog:
    if limit is not None:
        if limit < 1:
            raise CatalogError(f"limit must be at least 1, got {limit}")
        catalog.entries = catalog.entries[:limit]
    return catalog


def load_catalog(source: str = "auto", limit: int | None = None, *, settings: Settings | None = None,
                 progress: Progress | None = None) -> Catalog:
    """The ranked catalog from ``source`` (one of SOURCES); ``limit`` keeps the first N architectures."""
    settings = settings or get_settings()
    if source not in SOURCES:
        raise CatalogError(f"unknown catalog source {source!r}; valid: {', '.join(SOURCES)}")
    if source == "auto":
        source = "snapshot" if settings.snapshot_path.exists() else "registry"
    if source == "registry":
        entries = registry_entries(cache=settings.var_dir / "catalog" / "registry-model-types.json")
        return _limited(Catalog(source="registry", snapshot_id=None, entries=entries), limit)
    if source == "snapshot":
        return _limited(read_snapshot(settings.snapshot_path), limit)
    # limit counts architectures; the Hub listing is models, so list settings.hub_limit models and cut after.
    return _limited(hub_catalog(settings.hub_limit, progress=progress), limit)


def refresh_snapshot(limit: int | None = None, path: Path | None = None, *, endpoint: str | None = None,
                     progress: Progress | None = None) -> Catalog:
    """List the Hub (``limit`` models, default settings.hub_limit) and save it as the snapshot file."""
    settings = get_settings()
    n_models = limit if limit is not None else settings.hub_limit
    endpoint = resolve_endpoint(endpoint)
    catalog = hub_catalog(n_models, endpoint=endpoint, progress=progress)
    target = path or settings.snapshot_path
    catalog.snapshot_id = write_snapshot(catalog, target, endpoint=endpoint, limit=n_models)
    catalog.source = "hub"
    return catalog
