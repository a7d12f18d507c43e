"""Writes the per-model rows a ``compat sweep --models`` judged into ``catalog_models`` (one row per model and
device; a re-run replaces it). Apart from ``service.model_queries`` so a lookup never imports the store's writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from compat.model_rows import ModelRow
from service.models import CatalogModel
from service.store import Store, _upsert


def save_models(store: Store, rows: Iterable[ModelRow], device: str) -> int:
    """Upsert ``rows`` for ``device`` (one row per model and device; a re-run replaces it). Returns the count."""
    now = datetime.now(UTC)
    rows = list(rows)
    data = [{**r.model_dump(mode="json", exclude={"device"}), "device": device, "updated": now} for r in rows]
    with store.session() as s:
        _upsert(s, CatalogModel, data, ("model_id", "device"))
    return len(data)


