"""``compat catalog refresh --models``: the Hub's text-generation models of library ``transformers``, listed by
downloads and by trending score (both sorts the Hub API offers), each config.json read at the listed commit sha,
saved as a dated snapshot of model rows; the architecture ranking (summed downloads) is written from it.

Speaks only through ``huggingface_hub`` at ``HF_ENDPOINT`` (or an explicit endpoint); nothing here runs remote code:
a remote-code model is a row with its refusal.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi

from compat.configjson import config_digest
from compat.model_rows import HUB_SOURCE, ModelRow
from worker.catalog.catalog import Catalog, CatalogError, Progress, write_snapshot
from worker.catalog.corpus_models import classify
from worker.catalog.hub import (
    FETCH_WORKERS,
    fetch_config,
    rank_architectures,
    resolve_endpoint,
    validate_model_id,
)

MODELS_SNAPSHOT_VERSION = 1
# Our name -> huggingface_hub's ``sort`` (sent as ``downloads`` / ``trendingScore``).
SORTS = {"downloads": "downloads", "trending": "trending_score"}
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class ModelsSnapshot:
    created: str
    endpoint: str
    limit: int
    by_sort: dict[str, list[ModelRow]]  # sort -> rows in that sort's order

    def catalog_label(self, sort: str) -> str:
        return f"Hub text-generation (transformers) by {sort}, {self.created[:10]}"


def list_sorted(sort: str, limit: int, endpoint: str) -> list[dict[str, Any]]:
    """(model id, sha, downloads, trending score) of the first ``limit`` models by ``sort``."""
    try:
        listed = HfApi(endpoint=endpoint).list_models(pipeline_tag="text-generation", filter="transformers",
                                                      sort=SORTS[sort], limit=limit,
                                                      expand=["sha", "downloads", "trendingScore"])
        return [{"model_id": m.id, "sha": m.sha, "downloads": int(m.downloads or 0),
                 "trending": float(getattr(m, "trending_score", None) or 0)} for m in listed]
    except Exception as exc:  # noqa: BLE001 - any transport/HTTP error becomes one clear catalog error
        raise CatalogError(f"cannot list models by {sort} at {endpoint}: {type(exc).__name__}: {exc}") from exc


def _row(item: dict[str, Any], endpoint: str) -> ModelRow:
    """One listed model as a row: its config read at its sha and classified, or its refusal with the reason."""
    model_id, sha = item["model_id"], item["sha"]
    base = {"model_id": model_id, "source": HUB_SOURCE, "sha": sha, "downloads": item["downloads"],
            "trending": item["trending"]}
    try:
        validate_model_id(model_id)
        if not isinstance(sha, str) or not _SHA.match(sha):
            return ModelRow(architecture="?", refusal=f"no commit sha listed ({sha!r}): not pinned", **base)
        config = fetch_config(model_id, endpoint=endpoint, revision=sha)
    except Exception as exc:  # noqa: BLE001 - one bad model is a refused row, never a failed refresh
        return ModelRow(architecture="?", refusal=f"{type(exc).__name__}: {str(exc)[:200]}", **base)
    refusal, judged = classify(config)
    return ModelRow(architecture=config["architectures"][0], judged_as=judged, model_type=config["model_type"],
                    config_digest=config_digest(config), refusal=refusal, config=config, **base)


def hub_models(limit: int, *, endpoint: str | None = None, progress: Progress | None = None,
               workers: int = FETCH_WORKERS) -> ModelsSnapshot:
    """Both sorts listed, every distinct model's config read once at its sha."""
    endpoint = resolve_endpoint(endpoint)
    created = datetime.now(UTC).isoformat(timespec="seconds")
    listings = {sort: list_sorted(sort, limit, endpoint) for sort in SORTS}
    unique = list({i["model_id"]: i for items in listings.values() for i in items}.values())
    rows: dict[str, ModelRow] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for done, row in enumerate(pool.map(lambda i: _row(i, endpoint), unique), start=1):
            rows[row.model_id] = row
            if progress:
                progress(done, len(unique), row.model_id)
    snap = ModelsSnapshot(created=created, endpoint=endpoint, limit=limit, by_sort={})
    for sort, items in listings.items():
        snap.by_sort[sort] = [rows[i["model_id"]].model_copy(update={"catalog": snap.catalog_label(sort)})
                              for i in items]
    return snap


def architecture_ranking(snap: ModelsSnapshot) -> Catalog:
    """The architectures by summed downloads of the downloads listing's models (remote code kept and flagged)."""
    fetched = [(r.model_id, r.downloads or 0, r.config) for r in snap.by_sort["downloads"] if r.config is not None]
    return Catalog(source="hub", snapshot_id=None, entries=rank_architectures(fetched),
                   skipped=[(r.model_id, r.refusal or "") for r in snap.by_sort["downloads"] if r.config is None])


def write_models_snapshot(snap: ModelsSnapshot, path: Path) -> None:
    """The dated snapshot: per sort, each model's id, sha, score, architectures[0], config digest, refusal."""
    payload = {
        "schema_version": MODELS_SNAPSHOT_VERSION, "created": snap.created, "endpoint": snap.endpoint,
        "limit": snap.limit,
        "sorts": {sort: [{"model_id": r.model_id, "sha": r.sha, "score": r.downloads if sort == "downloads"
                          else r.trending, "architecture": r.architecture, "config_digest": r.config_digest,
                          "refusal": r.refusal} for r in rows] for sort, rows in snap.by_sort.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".models-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def refresh_models(limit: int, models_path: Path, snapshot_path: Path, *, endpoint: str | None = None,
                   progress: Progress | None = None) -> tuple[ModelsSnapshot, Catalog]:
    """List both sorts, save the dated models snapshot and the architecture ranking built from it."""
    snap = hub_models(limit, endpoint=endpoint, progress=progress)
    write_models_snapshot(snap, models_path)
    catalog = architecture_ranking(snap)
    catalog.snapshot_id = write_snapshot(catalog, snapshot_path, endpoint=snap.endpoint, limit=limit)
    return snap, catalog
