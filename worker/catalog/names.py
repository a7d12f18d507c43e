"""The catalog's architecture names without importing torch or transformers, for input checks and `compat catalog
list`: the registry's class names read from Transformers' source with ``ast``, a snapshot's names from its JSON.

``catalog.registry_entries`` stays the one source of the entries themselves; a test keeps the two in step.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from functools import cache
from pathlib import Path

from compat.settings import Settings, get_settings

# Where Transformers writes the causal-LM registry (read, never imported: importing it imports torch, 4-12 s).
MAPPING_FILE = ("models", "auto", "modeling_auto.py")
MAPPING_NAME = "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"


def _transformers_dir() -> Path | None:
    # find_spec of a top-level package locates it without running its __init__.
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def mapping_pairs(source: str) -> list[tuple[str, str]] | None:
    """(model_type, class name) pairs of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict([...])`` in ``source``,
    in order; None when the assignment is not there or not a literal list of string pairs."""
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == MAPPING_NAME
                                                     for t in node.targets)):
            continue
        call = node.value
        if not (isinstance(call, ast.Call) and len(call.args) == 1 and isinstance(call.args[0], ast.List)):
            return None
        pairs = []
        for item in call.args[0].elts:
            if not (isinstance(item, ast.Tuple) and len(item.elts) == 2
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in item.elts)):
                return None
            pairs.append((item.elts[0].value, item.elts[1].value))
        return pairs
    return None


@cache
def registry_names() -> tuple[str, ...] | None:
    """Every causal-LM class of the installed Transformers, once each, in its mapping order (the order and set of
    ``catalog.registry_entries()``); None when the source cannot be read that way (then callers check later)."""
    root = _transformers_dir()
    if root is None:
        return None
    try:
        pairs = mapping_pairs(root.joinpath(*MAPPING_FILE).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    if pairs is None:
        return None
    return tuple(dict.fromkeys(cls for _, cls in pairs))


def snapshot_names(path: Path) -> tuple[str, ...] | None:
    """A snapshot's architecture names, rank 1 first; None when it is missing or unreadable (loading it later
    reports why, with ``catalog.read_snapshot``'s message)."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        rows = [(int(e["rank"]), str(e["name"])) for e in payload["entries"]]
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
        return None
    return tuple(name for _, name in sorted(rows))


def catalog_names(source: str, settings: Settings | None = None) -> tuple[str, ...] | None:
    """The names ``load_catalog(source)`` would return, cheaply; None where only loading can tell (``hub``: a live
    listing; an unreadable snapshot)."""
    settings = settings or get_settings()
    if source == "auto":
        source = "snapshot" if settings.snapshot_path.exists() else "registry"
    if source == "registry":
        return registry_names()
    if source == "snapshot":
        return snapshot_names(settings.snapshot_path)
    return None
