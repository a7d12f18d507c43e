"""``tiny_checkpoint``: an architecture's tiny checkpoint, written back from the CPU reference cache's folder when the
same one was built before (same entry, seed, size bound, build code and library versions), else built and kept there.

Exactly the bytes first written come back, so the reference's own key (which digests the checkpoint's files) is the
same and a warm repeat hits it too. Only a build that succeeded is kept; a missing or corrupt entry is a fresh build.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from compat.results import ArchitectureEntry
from compat.settings import get_settings
from worker.build import build as build_module
from worker.build.build import BuiltModel, build_checkpoint
from worker.run.reference.reference_cache import ReferenceCache, key_for

# The build stage's code is part of the key: an edit to any of its modules is a new entry. Read at import, so the
# digest is of the code this process runs.
BUILD_CODE_DIGEST = hashlib.sha256(b"".join(
    p.read_bytes() for p in sorted(Path(build_module.__file__).parent.glob("*.py")))).hexdigest()
_FILE = "file:"  # an entry's tensor per checkpoint file: its bytes, as uint8


@dataclass(frozen=True)
class Checkpoint:
    """A tiny checkpoint on disk: its folder, its parameter count, and whether it came from the cache."""

    path: Path
    n_params: int
    cached: bool


def checkpoint_key(entry: ArchitectureEntry, seed: int) -> str:
    """Everything that determines the tiny checkpoint of ``entry``: what the build reads (its name, model type and
    config), the seed, the size bound and the build stage's code (``key_for`` adds the library versions)."""
    return key_for({"kind": "tiny_checkpoint", "name": entry.name, "model_type": entry.model_type,
                    "config": entry.config, "seed": seed, "max_tiny_params": get_settings().max_tiny_params,
                    "code": BUILD_CODE_DIGEST})


def tiny_checkpoint(entry: ArchitectureEntry, out_dir: Path, *, seed: int, cache: ReferenceCache | None,
                    build: Callable[..., BuiltModel] = build_checkpoint) -> Checkpoint:
    """``entry``'s tiny checkpoint in ``out_dir``: from ``cache`` when it holds it, else built by ``build`` (and kept
    there); without a cache, built. A build failure raises as ``build``'s does, and is never kept."""
    out_dir = Path(out_dir)
    if cache is None:
        return Checkpoint(out_dir, build(entry, out_dir, seed=seed).n_params, cached=False)
    key = checkpoint_key(entry, seed)
    if (hit := _restore(cache, key, out_dir)) is not None:
        return hit
    built = build(entry, out_dir, seed=seed)
    files = sorted(p.name for p in out_dir.iterdir() if p.is_file())
    tensors = {_FILE + name: _as_bytes_tensor((out_dir / name).read_bytes()) for name in files}
    cache.put(key, tensors, {"files": files, "n_params": built.n_params, "model_class": built.model_class})
    return Checkpoint(out_dir, built.n_params, cached=False)


def _as_bytes_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def _restore(cache: ReferenceCache, key: str, out_dir: Path) -> Checkpoint | None:
    """Write the entry's files into ``out_dir``; None (nothing written) when the entry is absent or malformed."""
    hit = cache.get(key)  # checks every tensor's digest: a corrupt entry is a miss
    if hit is None:
        return None
    tensors, meta = hit
    files, n_params = meta.get("files"), meta.get("n_params")
    if (not isinstance(files, list) or not files or not isinstance(n_params, int)
            or set(tensors) != {_FILE + f for f in files} or any("/" in f or f.startswith(".") for f in files)):
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in files:
        (out_dir / name).write_bytes(tensors[_FILE + name].numpy().tobytes())
    return Checkpoint(out_dir, n_params, cached=True)
