"""Process exit after a backward on the device: leaves the autograd engine's device threads holding no Python object,
so interpreter shutdown cannot abort the process.

Why: ``torch.autograd.graph._engine_run_backward`` stashes a ``contextvars`` context in the caller's thread-local
state, and every GraphTask copies that state. The engine's device thread (``pt_autograd_0``, started for PrivateUse1
because the device guard reports one) drops its last GraphTask reference *after* waking the caller, so the copy's
``SafePyObject`` may be released while ``Py_FinalizeEx`` runs; its destructor takes the GIL, the finalizing
interpreter exits the thread (``PyThread_exit_thread``), the forced unwind crosses a ``noexcept`` destructor and
``std::terminate`` aborts the process (exit 134, seen ~1 in 40 runs of "backward on neuron, then exit" under load;
gdb on the core: ``~ThreadLocalState`` -> ``SafePyObject::~SafePyObject`` -> ``take_gil`` -> ``PyThread_exit_thread``).
CUDA has the same engine path but its device threads are joined by its own atexit before finalization; PyTorch's
Python PrivateUse1 hooks offer no such hook, so we drain here: at exit, one tiny backward per device thread through
the engine directly (no context stash) makes each thread's last GraphTask one that owns no Python object.
The importing thread runs backward in itself (registration.py turns autograd multithreading off there, so neuron:N,
N > 0, works), so only other threads' backwards reach the device thread; the drain turns multithreading back on for
its own backwards, or they too would run in the exiting thread and drain nothing.
"""

from __future__ import annotations

import atexit

import torch

from neuron_backend import device_module, memory

# Sentinel tensors live until the process ends: freeing them would itself run Python-owned deleters on the way out.
_KEEP: list[torch.Tensor] = []
_registered: list[bool] = []


def drain_device_threads(cores: int, device: str = "neuron") -> int:
    """Run one sentinel backward on each core's engine thread; returns how many ran. Stops at the first core that
    does not exist (the engine starts one thread per core the C++ device guard reports)."""
    with torch.autograd.set_multithreading_enabled(True):  # reach the engine's threads, not the calling thread
        return _drain(cores, device)


def _drain(cores: int, device: str) -> int:
    drained = 0
    for index in range(cores):
        try:
            leaf = torch.ones(1, device=f"{device}:{index}", requires_grad=True)
            out = leaf * 1.0
            seed = torch.ones_like(out)
            _KEEP.extend((leaf, out, seed))
            # The engine's own entry point, not torch.autograd.backward: that one stashes the context this avoids.
            torch.autograd.Variable._execution_engine.run_backward(
                (out,), (seed,), False, False, (), allow_unreachable=True, accumulate_grad=True)
        except RuntimeError:  # past the last core (or its engine thread)
            break
        drained += 1
    return drained


def _at_exit() -> None:
    if not memory.used():  # never used (every process that imports torch autoloads the device): nothing to drain,
        return  # and the drain's own device ops would import torch.distributed.tensor (~0.5 s idle) at exit
    try:
        drain_device_threads(device_module.device_count())
    except Exception:  # noqa: BLE001 - exit must not fail on the drain; the abort it prevents is rare
        pass


def register() -> None:
    """Drain at interpreter exit (once per process)."""
    if not _registered:
        atexit.register(_at_exit)
        _registered.append(True)
