"""The command line's input checks that need no torch: device spelling, catalog source, architecture names, checks
and the simulated device's ``NEURON_PROFILE`` and ``NEURON_SWITCHES``. Each bad value is one line with suggestions and exit code 2.

Torch, transformers and the store load only after these pass: a typo answers in a fraction of a second.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cli.console import fail
from cli.suggest import unknown
from compat.identity import Identity, parse
from compat.results import ALL_CHECKS, DEFAULT_CHECKS, Check
from compat.settings import get_settings
from worker.catalog.names import catalog_names
from worker.run.process.device_names import KNOWN_DEVICES, device_type, normalize
from worker.run.process.pool import MemoryLimitTooLow, check_memory_limit

SOURCES = ("auto", "hub", "snapshot", "registry")  # catalog sources (worker.catalog.load.SOURCES, auto first)
LIST_ARCHITECTURES = "`compat catalog list`"
# Class-name endings shared by most architectures: compared with them, "NopeForCausalLM" resembles every
# "...ForCausalLM", so suggestions compare what comes before them.
HEAD_SUFFIXES = ("forcausallm", "lmheadmodel", "modelwithlmhead", "forconditionalgeneration")


def device(name: str, origin: str = "") -> str:
    """A device name a user typed (or set in ``origin``, e.g. COMPAT_DEVICE), normalized (``CUDA:1`` -> ``cuda:1``);
    bad spelling -> exit 2. Whether the device is available here is checked when it is resolved (that needs torch)."""
    if device_type(name) is None:
        where = f"; it comes from {origin}" if origin else ""
        raise fail(unknown("device", name, KNOWN_DEVICES) + f" (optionally with :INDEX){where}")
    return normalize(name)


def stored_device(name: str) -> str:
    """A device a read names: a device name (``neuron``) or a stored identity (``neuron (trn3, strict)``), the
    device's spelling checked as ``device`` checks it. The store decides whether it has that identity."""
    ident = parse(name)
    if ident is None or ident.profile is None and not ident.strict:
        return device(name)
    return Identity(device(ident.name), ident.profile, ident.strict).label


def source(name: str) -> str:
    if name not in SOURCES:
        raise fail(unknown("source", name, SOURCES))
    return name


def checks(values: Sequence[str] | None) -> list[Check]:
    """``--checks load,forward --checks compile`` -> checks; ``all`` = every check (compat.results.ALL_CHECKS), ``default`` = DEFAULT_CHECKS."""
    if not values:
        return list(DEFAULT_CHECKS)
    out: list[Check] = []
    valid = [str(c) for c in ALL_CHECKS]
    for item in ",".join(values).split(","):
        name = item.strip().lower()
        if not name:
            continue
        if name in ("all", "default"):
            out.extend(c for c in (ALL_CHECKS if name == "all" else DEFAULT_CHECKS) if c not in out)
        elif name in valid:
            if Check(name) not in out:
                out.append(Check(name))
        else:
            raise fail(unknown("check", name, valid) + f"; or all (every check), or default "
                       f"({', '.join(str(c) for c in DEFAULT_CHECKS)})")
    return out


def known_architectures(src: str) -> tuple[str, ...] | None:
    """The architectures of catalog ``src`` when they can be read without loading it (None: only loading tells)."""
    return catalog_names(src)


def architectures(names: Sequence[str], src: str) -> None:
    """Every name must be in catalog ``src`` (when its names can be read cheaply; a live Hub listing is checked
    after it is fetched, with the same message)."""
    known = known_architectures(src)
    if known is None:
        return
    bad = architecture_error(names, known)
    if bad:
        raise fail(bad)


def architecture_error(names: Sequence[str], known: Sequence[str]) -> str | None:
    """The message for the first of ``names`` not in ``known``, or None when all are."""
    have = set(known)
    missing = [n for n in names if n not in have]
    return unknown_architecture(missing[0], known) if missing else None


def unknown_architecture(name: str, known: Sequence[str]) -> str:
    """``unknown architecture 'X'; did you mean ...? 181 architectures known; list them with ...``"""
    return unknown("architecture", name, list(known), list_all=LIST_ARCHITECTURES, key=architecture_key)


def architecture_key(name: str) -> str:
    """What suggestions compare: the lower-case name without its head suffix (``llama`` for LlamaForCausalLM)."""
    lower = name.lower()
    for suffix in HEAD_SUFFIXES:
        if lower.endswith(suffix) and len(lower) > len(suffix):
            return lower.removesuffix(suffix)
    cut = lower.rfind("for")  # a misspelt head ("LlamaForCausalLn"): what comes before its "For"
    if cut > 0 and len(lower) - cut >= len("forcausal"):
        return lower[:cut]
    return lower


def _profiles_dir() -> Path | None:
    # find_spec of a top-level package locates it without importing it (importing it registers the device: torch).
    spec = importlib.util.find_spec("neuron_backend")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "hardware" / "profiles"


def observed_architectures() -> list[str]:
    """The architecture classes real Trainium hardware was observed running
    (``neuron_backend/hardware/profile_sources/observations.json``), read as JSON: locating the package does not
    import it."""
    folder = _profiles_dir()
    try:
        raw = json.loads((folder.parent / "profile_sources" / "observations.json").read_text()) if folder else {}
        return sorted({str(o["architecture"]) for o in raw.get("observations", [])})
    except (OSError, ValueError, KeyError, TypeError):
        return []  # unreadable: `compat calibrate` loads it next and reports why (EvidenceError)


def observed(names: Sequence[str]) -> None:
    """Every ``compat calibrate --arch`` name must be an observed class (the observations' own spelling)."""
    known = observed_architectures()
    missing = [n for n in names if n not in known]
    if known and missing:
        # Named in full: a few dozen classes, and no other command lists them.
        raise fail(unknown("observed architecture", missing[0], known, max_listed=len(known), key=architecture_key))


def profile_names() -> list[str]:
    """The shipped op-table profiles, by file name (``neuron_backend/hardware/profiles/<name>.json``)."""
    folder = _profiles_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder else []


def neuron_profile(device_name: str) -> None:
    """``NEURON_PROFILE`` must name a shipped profile when the simulated ``neuron`` device will be used (a real
    torch-neuronx, when installed, takes precedence and ignores it)."""
    real = importlib.util.find_spec("torch_neuronx") is not None and not getattr(
        sys.modules.get("torch_neuronx"), "SIMULATED", False)  # the autoloaded simulation's stand-in is not real
    if device_type(device_name) != "neuron" or real:
        return
    # Read like neuron_backend/config.py reads it: default trn2, surrounding blanks ignored.
    wanted = os.environ.get("NEURON_PROFILE", "trn2").strip()
    names = profile_names()
    if names and wanted not in names:
        raise fail(unknown("NEURON_PROFILE", wanted, names, plural="profiles"))


def harness_device(name: str | None) -> str:
    """The device a harness command runs on (default ``COMPAT_DEVICE``): spelling and, for ``neuron``, the
    profile and ``NEURON_SWITCHES``, checked."""
    dev = device(name) if name else device(get_settings().device, origin="COMPAT_DEVICE")
    neuron_profile(dev)
    neuron_switches(dev)
    return dev



def switch_table() -> list[dict]:
    """The active profile's decision switches (``NEURON_PROFILE``'s JSON, read before torch loads): each with its
    ``id``, ``subject``, ``default`` and ``options``; empty when the profile cannot be read here."""
    folder = _profiles_dir()
    name = os.environ.get("NEURON_PROFILE", "trn2").strip()
    try:
        data = json.loads((folder / f"{name}.json").read_text()) if folder else {}
    except (OSError, ValueError):
        return []  # a bad NEURON_PROFILE is neuron_profile()'s message; an unreadable file is the device's
    return [sw for sw in data.get("switches", []) if isinstance(sw, dict) and "id" in sw]


def _switch(value: str, known: dict[str, list[str]], origin: str) -> tuple[str, str]:
    """One ``ID=OPTION`` item checked against ``known``; a bad one is one line naming where it came from."""
    sid, eq, option = (part.strip() for part in value.partition("="))
    if not eq or not sid or not option:
        raise fail(f"{origin} {value!r}: expected ID=OPTION, e.g. grouped_mm_preconditions=not_enforced")
    if sid not in known:
        raise fail(f"{origin}: " + unknown("switch", sid, list(known), plural="switches"))
    if option not in known[sid]:
        raise fail(f"{origin}: switch {sid!r} has no option {option!r}; options: {', '.join(known[sid])}")
    return sid, option


def switches(values: Sequence[str], device_name: str) -> dict[str, str]:
    """``--switch ID=OPTION`` values checked against the active profile's decision switches (read from its JSON,
    before torch loads): an unknown id or option answers with the valid ones."""
    if not values:
        return {}
    if device_type(device_name) != "neuron":
        raise fail("--switch sets the simulated neuron device's decisions: use it with --device neuron")
    known = {sw["id"]: list(sw["options"]) for sw in switch_table()}
    return dict(_switch(value, known, "--switch") for value in values)


def neuron_switches(device_name: str) -> None:
    """``NEURON_SWITCHES`` (``ID=OPTION[,ID=OPTION]``) checked like ``--switch`` when the simulated ``neuron``
    device will be used: a bad value is one line naming the variable, not the device's traceback at load."""
    text = os.environ.get("NEURON_SWITCHES", "")
    if (not text.strip() or device_type(device_name) != "neuron"
            or importlib.util.find_spec("torch_neuronx") is not None):
        return
    known = {sw["id"]: list(sw["options"]) for sw in switch_table()}
    if not known:
        return  # the profile itself cannot be read here: the device says why when it loads
    for item in filter(None, (p.strip() for p in text.split(","))):
        _switch(item, known, f"NEURON_SWITCHES={text.strip()}")


def memory_limit() -> None:
    """COMPAT_ARCH_MEMORY_MB must be above what an idle worker holds (else every task dies at once): checked before
    any worker starts."""
    try:
        check_memory_limit(get_settings().arch_memory_mb)
    except MemoryLimitTooLow as exc:
        raise fail(str(exc)) from None
