"""The C++ core of the device (csrc/: allocator, guard, boxed kernel): built once, then loaded from its build folder.

``make install`` builds it (torch.utils.cpp_extension with g++ and ninja); an import finds the built module by the
digest of its source and torch's version, so a normal import compiles nothing and downloads nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import torch

NAME = "neuron_core"
CSRC = Path(__file__).resolve().parent / "csrc"
# The translation units and the header they share (csrc/neuron.h lists what each holds).
SOURCES = sorted(CSRC.glob("*.cpp"))
HEADERS = sorted(CSRC.glob("*.h"))
BUILD = Path(os.environ.get("NEURON_CORE_BUILD") or CSRC / "build")


class CoreBuildError(RuntimeError):
    """The C++ core could not be built (no compiler, or a compile error)."""


def _digest() -> str:
    h = hashlib.sha256()
    for path in (*SOURCES, *HEADERS):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(torch.__version__.encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def _stamp() -> Path:
    return BUILD / f"{NAME}.stamp"


def _built() -> Path | None:
    so = BUILD / f"{NAME}.so"
    stamp = _stamp()
    if so.exists() and stamp.exists() and stamp.read_text().strip() == _digest():
        return so
    return None


def build(verbose: bool = False) -> Path:
    """Compile csrc/*.cpp into BUILD (a minute or more); returns the module's path."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None and shutil.which("g++") is None:
        raise CoreBuildError("neuron_backend: no C++ compiler found: install Debian's g++ (apt-get install g++), "
                             "then run `make install`")
    from torch.utils.cpp_extension import load  # the build machinery is needed only here

    # ninja from PyPI (pyproject.toml) lives beside this interpreter, which need not be on PATH (make calls .venv/bin).
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # Built in a fresh side folder (a stale or half-built one confuses cpp_extension's up-to-date check), then moved
    # into place: a process importing the device meanwhile keeps loading the previous build.
    staging = BUILD.with_name(BUILD.name + f".tmp{os.getpid()}")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        load(name=NAME, sources=[str(p) for p in SOURCES], build_directory=str(staging), extra_cflags=["-O2"],
             is_python_module=True, verbose=verbose)
    except (RuntimeError, OSError, ImportError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise CoreBuildError(f"neuron_backend: building the C++ core failed: {exc}") from exc
    (staging / f"{NAME}.stamp").write_text(_digest())
    old = BUILD.with_name(BUILD.name + f".old{os.getpid()}")
    if BUILD.exists():
        BUILD.rename(old)
    staging.rename(BUILD)
    shutil.rmtree(old, ignore_errors=True)
    return BUILD / f"{NAME}.so"


def load() -> ModuleType:
    """The core module: imported from its build folder, built first if it is missing or stale."""
    mod = sys.modules.get(NAME)
    if mod is not None:
        return mod
    so = _built() or build()
    spec = importlib.util.spec_from_file_location(NAME, so)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = mod
    spec.loader.exec_module(mod)
    return mod


def ensure_built(verbose: bool = False) -> Path:
    """`make install` and the image: the built module's path, compiling it only if missing or stale."""
    return _built() or build(verbose=verbose)


if __name__ == "__main__":
    print(ensure_built(verbose="-v" in sys.argv))
