"""torch.compile's ``neuron`` backend made known to Dynamo without importing Dynamo: registration stays cheap.

Importing torch._dynamo costs about 2 s, more than ``import torch`` itself; the autoloaded device must not add that to
every process that imports torch. So the backend enters Dynamo's registry when Dynamo is first imported, as an entry
point that imports compile_backend only at the first ``torch.compile(backend="neuron")``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType

DYNAMO = "torch._dynamo"
BACKEND = "neuron"


class _LazyBackend:
    """What Dynamo's registry keeps for a backend it found by entry point: ``load()`` gives the compiler function.

    torch/_dynamo/backends/registry.py (torch 2.13.0, git cf30153c4c131c8164ee7798e5022d810682e2cb)
    ``lookup_backend``: a name in ``_BACKENDS`` but not yet in ``_COMPILER_FNS`` is registered from
    ``_BACKENDS[name].load()`` on first use (the path its ``torch_dynamo_backends`` entry points take). The device
    gives no entry point for this: the real torch-neuronx registers one named ``neuron``, and a second of the same
    name in the venv could be picked instead of it."""

    name = BACKEND

    def load(self) -> Callable:
        return importlib.import_module("neuron_backend.compile_backend").neuron


def _enter_registry() -> None:
    """Dynamo is imported: the device's modules are runtime, never traced (Dynamo would try to compile ``wrap``
    when a compiled region calls into the device), and ``neuron`` is a known backend name."""
    dynamo = sys.modules[DYNAMO]
    dynamo.trace_rules.add("neuron_backend")
    registry = importlib.import_module("torch._dynamo.backends.registry")
    registry._BACKENDS.setdefault(BACKEND, _LazyBackend())  # a backend already registered by name stays


class _AfterExec(importlib.abc.Loader):
    """Runs the real loader, then ``then()``: a post-import hook for one module."""

    def __init__(self, inner: importlib.abc.Loader, then: Callable[[], None]) -> None:
        self.inner, self.then = inner, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = module.__spec__.loader = self.inner  # as if never wrapped (reload, inspect)
        self.inner.exec_module(module)
        self.then()


class _WatchDynamo(importlib.abc.MetaPathFinder):
    """Finds torch._dynamo as the other finders do, and wraps its loader; removes itself once used."""

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if fullname != DYNAMO:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _AfterExec(spec.loader, _enter_registry)
        return spec


def install() -> None:
    """Make ``backend="neuron"`` known to Dynamo now if it is imported, else when it is."""
    if DYNAMO in sys.modules:
        _enter_registry()
    elif not any(isinstance(f, _WatchDynamo) for f in sys.meta_path):
        sys.meta_path.insert(0, _WatchDynamo())
