"""call_with_stack_room: the CPython data-stack chunk-edge thrashing (gh-142183) it exists for, and that it stops it."""

from __future__ import annotations

import resource
import sys

import pytest

from worker.run.process import stack_room
from worker.run.process.stack_room import call_with_stack_room

CALLS = 2000


def _leaf() -> int:
    return 1


def _loop(n: int) -> None:
    for _ in range(n):
        _leaf()


def _at_depth(depth: int, fn, *args):  # noqa: ANN001, ANN002, ANN202
    return fn(*args) if depth == 0 else _at_depth(depth - 1, fn, *args)


def _minor_faults(fn, *args) -> int:  # noqa: ANN001, ANN002
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn(*args)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _call_without_room(fn, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
    """The control: call_with_stack_room's frames exactly (wrapper + trampoline), with no extra room declared."""
    return _plain(fn, *args, **kwargs)


_plain = stack_room._roomy(stack_room._trampoline, 0)
DEPTHS = range(600)  # chunks start at 16 KiB: an edge every ~100-200 of these small frames, several in range


def _thrashing_depths(call) -> list[int]:  # noqa: ANN001
    """Depths at which a loop of calls made through ``call`` crosses a chunk edge on every call (then each call
    maps a fresh chunk: at least one minor page fault per call; without the edge it is a few in total)."""
    return [d for d in DEPTHS if _minor_faults(_at_depth, d, call, _loop, CALLS) >= CALLS // 2]


def test_stack_room_stops_chunk_edge_thrashing() -> None:
    control = _thrashing_depths(_call_without_room)
    if not control:
        pytest.skip(f"LOUD: this CPython ({sys.version.split()[0]}) does not thrash at data-stack chunk edges "
                    "(gh-142183 fixed in it); nothing for call_with_stack_room to prevent here")
    # Same frames, same loop, at every depth: with the room, the loop's frames always land in the big chunk's
    # free half, so no depth thrashes (a fault per call would be >= CALLS/2; a handful is first-touch of pages).
    assert _thrashing_depths(call_with_stack_room) == [], f"control thrashed at depths {control}"


def test_passes_arguments_and_results_and_exceptions_through() -> None:
    def f(a: int, fn: str = "", **kw: int) -> tuple[int, str, dict[str, int]]:
        return a, fn, kw

    # `fn` is positional-only in the trampoline, so a callee's own `fn` keyword still reaches it.
    assert call_with_stack_room(f, 1, fn="x", k=2) == (1, "x", {"k": 2})
    with pytest.raises(ZeroDivisionError):
        call_with_stack_room(lambda: 1 / 0)


def test_deep_recursion_inside_the_room_still_works() -> None:
    # Frames beyond the room's free half spill into ordinary chunks again: correctness does not depend on room.
    assert call_with_stack_room(_at_depth, 900, lambda: "bottom") == "bottom"
