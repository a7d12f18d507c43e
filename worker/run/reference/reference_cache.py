"""A content-addressed on-disk cache of CPU reference results (issue 20): the same checkpoint, inputs, check
parameters and library versions give the same reference, so a sweep reuses it instead of recomputing it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save as save_tensors

from compat.settings import get_settings

FORMAT = 1  # bump when what an entry holds, or how a reference is computed, changes incompatibly
SUFFIX = ".safetensors"
LIBRARIES = ("torch", "transformers", "peft", "trl")
_META = "compat_reference"


def _dist_version(name: str) -> str:
    """The installed version of a distribution ("absent" when not installed); the one version source (tests patch it)."""
    return _installed_version(name)


@functools.cache
def _installed_version(name: str) -> str:
    # Read once per process: the metadata scan costs ~2 ms a name and every cache key asks for four (8.5 ms a lookup,
    # three lookups an architecture); a process keeps running the library it imported, so the first answer stays true.
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _python_version() -> str:
    return platform.python_version()


def library_versions() -> dict[str, str]:
    """Python's and the libraries' versions: a reference computed under other versions is another entry."""
    return {"python": _python_version(), **{name: _dist_version(name) for name in LIBRARIES}}


def versions_of(*names: str) -> dict[str, str]:
    """Versions of distributions a part's reference also runs beyond LIBRARIES (the sft run's accelerate): that
    part's key names them (through ``_dist_version``, so tests patch one source)."""
    return {name: _dist_version(name) for name in names}


def tensor_digest(t: torch.Tensor) -> str:
    """sha256 of a tensor's dtype, shape and bytes."""
    t = t.detach().to("cpu").contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def tensors_spec(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """A JSON form of a dict of tensors for a key: each one's shape, dtype and digest."""
    return {name: {"shape": list(t.shape), "dtype": str(t.dtype), "sha256": tensor_digest(t)}
            for name, t in sorted(tensors.items())}


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True, default=str)


def key_for(parts: dict[str, Any]) -> str:
    """The entry's key: sha256 of the canonical JSON of ``parts`` plus the format and the library versions."""
    return hashlib.sha256(_canonical({"format": FORMAT, "versions": library_versions(), **parts}).encode()
                          ).hexdigest()


@dataclass(frozen=True)
class CacheInfo:
    folder: Path
    entries: int
    size_bytes: int
    max_bytes: int


class ReferenceCache:
    """One folder of entries ``<key>.safetensors``; safe to share between processes (atomic writes, misses on races).

    Key: sha256 over a canonical JSON of every part that determines a reference (``key_for``). Value: one
    safetensors file per entry (never pickle), its JSON metadata in the safetensors header with a digest of every
    tensor, written atomically (temp file + ``os.replace``). A missing, partial or corrupt entry is a miss, never a
    crash or a wrong hit. Past ``max_bytes`` the least recently used entries (by mtime; a hit touches it) go. Only
    what the caller stores is cached: the reference stores a forward only once its two fp32 runs agreed.
    """

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = Path(folder)
        self.max_bytes = int(max_bytes)

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def get(self, key: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
        """The entry's tensors and metadata, or None on a miss (absent, partial, corrupt or another key's)."""
        path = self._path(key)
        try:
            with safe_open(str(path), framework="pt") as f:
                header = f.metadata() or {}
                tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - safe_open has no iter
            stored = json.loads(header[_META])
            if stored.get("key") != key or stored.get("format") != FORMAT:
                return None
            digests = stored.get("digests")
            if not isinstance(digests, dict) or set(digests) != set(tensors):
                return None
            if any(tensor_digest(t) != digests[name] for name, t in tensors.items()):
                return None
            meta = stored.get("meta")
            if not isinstance(meta, dict):
                return None
        except Exception:  # noqa: BLE001 - any unreadable entry is a miss, never a crash
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently *used*: a hit keeps the entry young
        return tensors, meta

    def put(self, key: str, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> bool:
        """Store an entry atomically; False (and nothing stored) when it cannot be written. Never raises."""
        try:
            own = {name: t.detach().to("cpu").contiguous().clone() for name, t in tensors.items()}
            header = {_META: _canonical({"key": key, "format": FORMAT, "meta": meta,
                                         "digests": {name: tensor_digest(t) for name, t in own.items()}})}
            blob = save_tensors(own, metadata=header)
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=SUFFIX)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the entry from workers running as other users
                os.replace(tmp, self._path(key))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except Exception:  # noqa: BLE001 - a cache that cannot write is a cache that misses
            return False
        self.evict()
        return True

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        try:
            paths = list(self.folder.glob(f"*{SUFFIX}"))
        except OSError:
            return []
        for p in paths:
            if p.name.startswith(".tmp-"):
                continue
            try:
                st = p.stat()
            except OSError:  # evicted or replaced by another process meanwhile
                continue
            out.append((st.st_mtime, st.st_size, p))
        return out

    def evict(self) -> int:
        """Delete the least recently used entries until the folder is within ``max_bytes``; how many went."""
        entries = sorted(self._entries(), key=lambda e: (e[0], e[2].name))
        total = sum(size for _, size, _ in entries)
        gone = 0
        for _mtime, size, path in entries:
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                gone += 1
            total -= size
        return gone

    def info(self) -> CacheInfo:
        entries = self._entries()
        return CacheInfo(self.folder, len(entries), sum(size for _, size, _ in entries), self.max_bytes)

    def clear(self) -> int:
        """Delete every entry (and leftover temp files); how many entries went."""
        gone = 0
        try:
            paths = list(self.folder.glob(f"*{SUFFIX}"))
        except OSError:
            return 0
        for p in paths:
            with contextlib.suppress(OSError):
                p.unlink()
                gone += 0 if p.name.startswith(".tmp-") else 1
        return gone


def folder_cache() -> ReferenceCache:
    """The configured cache folder and bound, whether or not the cache is enabled (``compat cache``)."""
    s = get_settings()
    return ReferenceCache(s.reference_cache_path, s.reference_cache_mb * 1024 * 1024)


def default_cache() -> ReferenceCache | None:
    """The cache the runner uses: None when ``COMPAT_REFERENCE_CACHE=0``."""
    return folder_cache() if get_settings().reference_cache else None


# The tiny checkpoints the references are computed from (worker/run/runner/checkpoints.py) are kept beside them, in a
# folder of their own with half the bound: the same switch and folder setting govern both, `compat cache` shows both.
CHECKPOINTS = "checkpoints"


def checkpoint_folder_cache() -> ReferenceCache:
    """The tiny checkpoints' folder (``<reference cache>/checkpoints``) and bound, whether or not caching is on."""
    s = get_settings()
    return ReferenceCache(s.reference_cache_path / CHECKPOINTS, s.reference_cache_mb * 1024 * 1024 // 2)


def default_checkpoint_cache() -> ReferenceCache | None:
    """The checkpoints' cache the runner uses: None when ``COMPAT_REFERENCE_CACHE=0``."""
    return checkpoint_folder_cache() if get_settings().reference_cache else None
