"""The catalog: ranked architectures and where they came from; its offline sources, the registry and the snapshot.

``registry`` = every causal-LM class the installed Transformers knows, in its own order (the offline default);
``snapshot`` = a Hub listing (``worker.catalog.hub``) saved as versioned JSON. ``worker.catalog.load`` picks one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import transformers
from pydantic import ValidationError
from transformers import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from compat.results import ArchitectureEntry

SNAPSHOT_SCHEMA_VERSION = 1
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024  # 1000 config.json files are ~5 MB; anything far past that is not ours

Progress = Callable[[int, int, str], None]  # (done, total, what) for long work


class CatalogError(ValueError):
    """The catalog cannot be loaded (unknown source, corrupt snapshot, unreachable Hub, ...)."""


@dataclass
class Catalog:
    """Ranked architectures (rank 1 first) and where they came from."""

    source: str
    snapshot_id: str | None
    entries: list[ArchitectureEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (model id, reason) left out of a Hub listing

    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def get(self, name: str) -> ArchitectureEntry | None:
        return next((e for e in self.entries if e.name == name), None)


def registry_entries(cache: Path | None = None) -> list[ArchitectureEntry]:
    """Every causal-LM class of the installed Transformers, in its mapping order, one entry per class.

    A class mapped from several model types (``LlamaForCausalLM`` from llama, internlm3, ...) keeps the model
    type whose config class is the class's own ``config_class``, else the first one. Reading ``config_class``
    imports the class's modeling module (7 classes, ~1.8 s of a sweep's start with their dependencies): ``cache``,
    a JSON file, keeps those choices for as long as the files they were read from are unchanged.
    """
    by_class: dict[str, list[str]] = {}
    for model_type, class_name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        by_class.setdefault(class_name, []).append(model_type)
    several = {c: mts for c, mts in by_class.items() if len(mts) > 1}
    key = _sources_key(several) if cache is not None else None  # None: nothing to keep them under
    chosen = _read_choices(cache, key) if cache is not None and key is not None else None
    if chosen is None:
        chosen = {c: _own_model_type(c, mts) for c, mts in several.items()}
        if cache is not None and key is not None:
            try:  # a file that cannot be written (a read-only var dir) only costs the next start its imports
                _write_json(cache, {"key": key, "choices": chosen}, prefix=".registry-")
            except OSError:
                pass
    return [ArchitectureEntry(name=class_name, model_type=chosen.get(class_name, model_types[0]), rank=rank)
            for rank, (class_name, model_types) in enumerate(by_class.items(), start=1)]


def _own_model_type(class_name: str, model_types: list[str]) -> str:
    """Of ``model_types`` (all mapped to ``class_name``), the one of the class's own config class, else the first."""
    own = getattr(getattr(transformers, class_name, None), "config_class", None)
    own_type = getattr(own, "model_type", None)
    if own_type in model_types:
        return own_type
    if own is not None:
        return next((mt for mt in model_types if mt in CONFIG_MAPPING and CONFIG_MAPPING[mt] is own), model_types[0])
    return model_types[0]


def _sources_key(several: dict[str, list[str]]) -> str | None:
    """What the choices are read from: the installed Transformers (version, where), its two auto mappings and each
    class's modeling file (path, mtime, size), found without importing them; None when a file cannot be found."""
    modules = ["models.auto.modeling_auto", "models.auto.configuration_auto"]
    class_to_module = getattr(transformers, "_class_to_module", {})  # transformers' lazy import structure
    try:
        modules += [class_to_module[c] for c in several]
        files = []
        for module in modules:
            spec = importlib.util.find_spec(f"transformers.{module}")
            if spec is None or spec.origin is None:
                return None
            st = os.stat(spec.origin)
            files.append([spec.origin, st.st_mtime_ns, st.st_size])
    except (KeyError, ImportError, OSError, ValueError):
        return None
    payload = {"transformers": transformers.__version__, "several": several, "files": files}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _read_choices(path: Path, key: str) -> dict[str, str] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("choices"), dict):
        return None
    return data["choices"]


def _snapshot_id(payload: dict[str, Any]) -> str:
    return f"{payload.get('created', 'unknown')}/{payload.get('limit')}"


def read_snapshot(path: Path) -> Catalog:
    """Load a snapshot file written by :func:`refresh_snapshot`; CatalogError when missing or corrupt."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CatalogError(f"no catalog snapshot at {path} (run `compat catalog refresh`)") from exc
    if size > MAX_SNAPSHOT_BYTES:
        raise CatalogError(f"catalog snapshot {path} is {size} bytes, over the {MAX_SNAPSHOT_BYTES} cap")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"corrupt catalog snapshot {path}: {exc}") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("entries"), list):
        raise CatalogError(f"corrupt catalog snapshot {path}: expected an object with an 'entries' list")
    version = payload.get("schema_version")
    if version != SNAPSHOT_SCHEMA_VERSION:
        raise CatalogError(f"catalog snapshot {path} has schema version {version!r}; this harness reads "
                           f"version {SNAPSHOT_SCHEMA_VERSION} (run `compat catalog refresh`)")
    try:
        entries = [ArchitectureEntry.model_validate(e) for e in payload["entries"]]
    except ValidationError as exc:
        raise CatalogError(f"corrupt catalog snapshot {path}: {exc.error_count()} invalid entries: "
                           f"{exc.errors()[0]['msg']}") from exc
    entries.sort(key=lambda e: e.rank)
    skipped = [tuple(s) for s in payload.get("skipped") or [] if isinstance(s, list) and len(s) == 2]
    return Catalog(source="snapshot", snapshot_id=payload.get("id") or _snapshot_id(payload), entries=entries,
                   skipped=skipped)


def write_snapshot(catalog: Catalog, path: Path, *, endpoint: str, limit: int | None) -> str:
    """Write ``catalog`` as a versioned snapshot, atomically (temp file + rename); returns its id."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    payload = {
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
        "created": created,
        "endpoint": endpoint,
        "limit": limit,
        "entries": [e.model_dump(mode="json") for e in catalog.entries],
        "skipped": [list(s) for s in catalog.skipped],
    }
    payload["id"] = _snapshot_id(payload)
    _write_json(path, payload, prefix=".snapshot-")
    return payload["id"]


def _write_json(path: Path, payload: dict[str, Any], *, prefix: str) -> None:
    """Atomic (temp file in the same folder, fsync, rename): a reader never sees half a file; nothing left on error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
