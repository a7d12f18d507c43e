"""What determines a run's results, collected once when the run starts: library versions, the device backend and
its version, the profile and its sources' digest, the decision switches, strict or fallback, the harness version.

``compat.moved`` names the keys and diffs two runs' mappings; this module reads them from the installed packages and
the resolved device (issue 34 item 2).
"""

from __future__ import annotations

import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from compat.moved import LIBRARIES, switch_key
from worker.run.process.devices import Device

HARNESS_DISTRIBUTION = "neuron-compat"


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def is_strict(device: Device) -> bool:
    """No op may fall back to the CPU: the simulated device says so itself; otherwise the setting ``compat sweep
    --strict`` makes for every worker (``NEURON_CPU_FALLBACK=0``)."""
    if "strict" in device.info.details:
        return bool(device.info.details["strict"])
    return os.environ.get("NEURON_CPU_FALLBACK", "1").strip() == "0"


def profile_digest(model_dir: Path, profile: str) -> str:
    """sha256 (first 16 hex digits) over the profile's table and every file it is built from, in the backend's
    hardware-model folder (``profiles/<profile>.json`` and ``profile_sources/*``, in name order): an edit to either
    moves it."""
    files = [model_dir / "profiles" / f"{profile}.json"]
    sources = model_dir / "profile_sources"
    if sources.is_dir():
        files += sorted(p for p in sources.iterdir() if p.is_file() and p.suffix in {".json", ".txt", ".py"})
    h = hashlib.sha256()
    for f in files:
        if f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def run_determinants(device: Device) -> dict[str, str]:
    """The flat mapping a run records (``RunInfo.determinants``): every key ``compat.moved`` diffs."""
    out = {lib: _version(lib) for lib in LIBRARIES}
    info = device.info
    kind = info.name.split(":")[0]
    out["device backend"] = (f"{kind} (simulated)" if info.simulated else info.description or kind)
    out["backend version"] = info.backend_version or "unknown"
    details = info.details or {}
    if profile := details.get("profile"):
        out["profile"] = str(profile)
        module = device.backend
        if module is not None and getattr(module, "__file__", None):
            # neuron_backend keeps its hardware model (profiles and their sources) in hardware/
            out["profile digest"] = profile_digest(Path(module.__file__).parent / "hardware", str(profile))
    for sid, option in sorted((details.get("switches") or {}).items()):
        out[switch_key(sid)] = str(option)
    out["mode"] = "strict" if is_strict(device) else "fallback"
    out["harness"] = _version(HARNESS_DISTRIBUTION)
    return out
