"""Errors the device cannot raise where they happen (inside a C++ autograd node the engine runs for the device, on its
device thread or, with autograd multithreading off, in the caller): held, the op run on the host instead, and raised
by the next device op outside such a node.

Why: torch 2.13's Python device guard (``torch::acc::PythonDeviceGuard``, torch/csrc/acc/Module.cpp) answers
``exchangeStream``, which is ``noexcept``, by calling the Python ``type_``. The autograd engine's stream guard calls
it while unwinding from the op's error with the Python error still set, so the process aborts (``std::terminate``,
"terminate called without an active exception"; gdb: ``~InlineStreamGuard`` -> ``PythonDeviceGuard::exchangeStream``).
Strict mode met it in ``CopySlices::apply_impl``'s ``new_empty_strided`` (``y = x * 2; y[0:2] += 1;
y.sum().backward()``). The real backend registers a C++ guard (``C10_REGISTER_GUARD_IMPL(PrivateUse1,
NeuronGuardImpl)``, torch_neuronx/csrc/core/NeuronGuardImpl.cpp in github.com/parmoham-aws/test-repo-parmoham @
98154b867aa24562a3213e520d9ad7fd41032291, pre-beta, indicative), so there backward raises at the op. Here backward
returns and the next device op raises the same typed error (same op, dtypes and message, with a note), so what a
caller catches is the same error, one op later.
"""

from __future__ import annotations

import threading

import torch
from torch.autograd.function import BackwardCFunction

# The first held error (the first blocking op); one at most. Read without the lock on the dispatch hot path.
HELD: list[BaseException] = []
_lock = threading.Lock()


def in_engine_cpp_node() -> bool:
    """Running a C++ autograd node for the device: on a thread the engine started, or in the calling thread when
    autograd multithreading is off there (registration.py turns it off in the importing thread, so the engine runs
    every core's nodes in the caller): where raising aborts. A custom ``autograd.Function``'s backward (a Python
    node) raises safely and is not included."""
    node = torch._C._current_autograd_node()
    return (node is not None and not isinstance(node, BackwardCFunction)
            and (isinstance(threading.current_thread(), threading._DummyThread)
                 or not torch._C._is_multithreading_enabled()))


def hold(err: BaseException) -> None:
    """Keep ``err`` for the next device op outside the engine's C++ nodes (the first one only)."""
    node = torch._C._current_autograd_node()
    err.add_note(f"raised at the first device op after autograd's {node.name() if node else 'C++'} node, where it "
                 "happened: an error there aborts the process under PyTorch's Python device guard "
                 "(neuron_backend/deferred.py); the real backend raises it at the op")
    with _lock:
        if not HELD:
            HELD.append(err)


def raise_held() -> None:
    """Raise the held error, if any (the caller has checked ``HELD`` and that it is outside such a node)."""
    with _lock:
        err = HELD.pop() if HELD else None
    if err is not None:
        raise err


def clear() -> None:
    """Drop a held error (a new check starts: a held error belongs to the check that met it)."""
    with _lock:
        HELD.clear()
