"""Run a call at the start of a fresh, large CPython data-stack chunk, so its hot loops never straddle a chunk edge.

Workaround for CPython gh-142183, fixed only from 3.13/3.14 maintenance releases on: see ``call_with_stack_room``.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Python frames live on a per-thread "data stack" made of chunks (16 KiB to start). CPython <= 3.12 frees a chunk
# as soon as its first frame returns, so a loop whose calls cross from one chunk into the next mmaps, page-faults
# and munmaps a chunk on *every* call (gh-142183: "Calls across stack chunks perform badly"). Whether a workload
# hits this depends only on how deep the stack already is when it starts. Measured here: an architecture run under a
# Celery pool process (about 45 frames of Celery/billiard/click below the task) took 28-34k minor page faults/s in
# `_PyThreadState_BumpFramePointerSlow` and ran its generate check ~2x slower than in the in-process pool, which
# starts ~10 frames deep and happened to miss the edge (bench/README.md, "Celery overhead").
#
# The workaround: call through a trampoline whose frame declares a huge evaluation stack. CPython then sizes the
# next chunk to fit it (the smallest power-of-two multiple of 16 KiB: 1 MiB here), and every frame the call pushes
# afterwards lands in the unused half of that chunk: room for thousands of frames, so no edge on any hot path.
# The declared stack is never written, so its pages are never touched (no RSS); the chunk is freed on return.
ROOM_SLOTS = 1 << 16  # 64Ki pointer slots = 512 KiB declared; the chunk CPython allocates for it is 1 MiB


def _trampoline(fn, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - signature of any call
    return fn(*args, **kwargs)


def _roomy(func: types.FunctionType, slots: int) -> types.FunctionType:
    code = func.__code__.replace(co_stacksize=func.__code__.co_stacksize + slots)
    return types.FunctionType(code, func.__globals__, func.__name__, func.__defaults__, func.__closure__)


_call = _roomy(_trampoline, ROOM_SLOTS)


def call_with_stack_room(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, run with ~500 KiB of free Python data stack below it (see module comment)."""
    return _call(fn, *args, **kwargs)
