"""Streams and events of the simulated device: ``torch.neuron.Stream``, ``Event``, ``current_stream``, ``stream()``.

Every device op here has finished when it returns, so a stream only labels work: waits are no-ops, queries say done.

The names and signatures follow the public pre-beta torch-neuronx source (indicative, not the release):
github.com/parmoham-aws/test-repo-parmoham @ 98154b867aa24562a3213e520d9ad7fd41032291,
``torch_neuronx/streams.py`` (``Stream(device=None, priority=0)`` subclassing ``torch.Stream`` through its C++ base,
``Event(enable_timing=False, blocking=False)`` with its own base, not ``torch.Event``) and ``torch_neuronx/neuron.py``
(``torch.neuron.current_stream / default_stream / set_stream / stream``). PyTorch's FSDP2 asks the device module for
exactly these (``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``: ``Stream(priority=-1)``,
``current_stream()``, ``with stream(s)``, ``Event``; torch 2.13).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import torch

_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, the device_type torch.Stream stores for "neuron"
_DEFAULT_ID = 0  # the default stream of every core; torch.accelerator.current_stream() also answers stream id 0
_ids = itertools.count(1)
_state = threading.local()  # per thread, as CUDA's current stream is: core -> Stream


def _no_resolver(device) -> int:
    raise RuntimeError("neuron_backend.streams is not bound to the device module")


_resolve: Callable[[int | str | torch.device | None], int] = _no_resolver


def bind(resolve_core: Callable[[int | str | torch.device | None], int]) -> None:
    """Give this module the device module's ``device -> core index`` rule (current core for None), once."""
    global _resolve
    _resolve = resolve_core


class Stream(torch.Stream):
    """A stream of one NeuronCore; ``priority`` is kept but changes nothing (work never waits in a queue here)."""

    def __new__(cls, device: int | str | torch.device | None = None, priority: int = 0, **kwargs) -> Stream:
        if {"stream_id", "device_index", "device_type"} <= kwargs.keys():  # rebuilt from its three numbers
            return super().__new__(
                cls, stream_id=kwargs["stream_id"], device_index=kwargs["device_index"], device_type=_PRIVATEUSE1
            )
        stream_id = kwargs.get("_stream_id")
        return super().__new__(
            cls,
            stream_id=next(_ids) if stream_id is None else stream_id,
            device_index=_resolve(device),
            device_type=_PRIVATEUSE1,
        )

    def __init__(self, device: int | str | torch.device | None = None, priority: int = 0, **kwargs) -> None:
        self.priority = priority

    def wait_event(self, event: Event) -> None:
        """Later work on this stream runs after ``event``: always true here."""

    def wait_stream(self, stream: torch.Stream) -> None:
        """Later work on this stream runs after the work queued on ``stream``: always true here."""

    def record_event(self, event: Event | None = None) -> Event:
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def __enter__(self) -> Stream:
        _push(self)
        return self

    def __exit__(self, *exc) -> None:
        _pop(self.device_index)


class Event(torch.Event):
    """A marker on a stream; ``elapsed_time`` is host time between two records (``enable_timing=True``).

    Its memory is a ``torch.Event``'s, as the real event's is a ``THPEvent``'s (``struct THNPEvent : THPEvent``,
    torch_neuronx/csrc/Stream.h at the SOURCE above): PyTorch's C++ reads it as one, e.g. FSDP2's
    ``torch.accelerator.current_stream().wait_event(all_gather_event)`` (_fsdp_param_group.py finalize_backward,
    torch 2.13). A plain Python object there was read as garbage ("Unknown device: 96"). One difference:
    ``isinstance(event, torch.Event)`` is True here, False for the real type (its ``tp_base`` is 0, Stream.cpp).
    The C++ event is never recorded (``record`` below is Python), so a C++ wait on it returns at once, as every
    wait here does."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False) -> Event:
        return super().__new__(cls, device=torch.device("neuron", _resolve(None)), enable_timing=enable_timing,
                               blocking=blocking)

    def __init__(self, enable_timing: bool = False, blocking: bool = False) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self._recorded_at: float | None = None

    def record(self, stream: torch.Stream | None = None) -> None:
        self._recorded_at = time.perf_counter()

    def wait(self, stream: torch.Stream | None = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event to ``end_event``; both need ``enable_timing=True`` and a record."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True to measure elapsed time")
        if self._recorded_at is None or end_event._recorded_at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time")
        return (end_event._recorded_at - self._recorded_at) * 1000.0


def _stacks() -> dict[int, list[Stream]]:
    stacks = getattr(_state, "stacks", None)
    if stacks is None:
        stacks = _state.stacks = {}
    return stacks


def default_stream(device: int | str | torch.device | None = None) -> Stream:
    core = _resolve(device)
    return Stream(core, _stream_id=_DEFAULT_ID)


def current_stream(device: int | str | torch.device | None = None) -> Stream:
    core = _resolve(device)
    stack = _stacks().get(core)
    return stack[-1] if stack else default_stream(core)


def set_stream(stream: Stream | None) -> None:
    """Make ``stream`` current on its core for this thread (None: no change, as torch.cuda.set_stream)."""
    if stream is None:
        return
    stack = _stacks().setdefault(stream.device_index, [])
    if stack:
        stack[-1] = stream
    else:
        stack.append(stream)


def _push(stream: Stream) -> None:
    _stacks().setdefault(stream.device_index, []).append(stream)


def _pop(core: int) -> None:
    stack = _stacks().get(core)
    if stack:
        stack.pop()


class StreamContext:
    """``with torch.neuron.stream(s):`` makes ``s`` current on its core; None selects nothing."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream

    def __enter__(self) -> Stream | None:
        if self.stream is not None:
            _push(self.stream)
        return self.stream

    def __exit__(self, *exc) -> None:
        if self.stream is not None:
            _pop(self.stream.device_index)


def stream(stream: Stream | None) -> StreamContext:
    return StreamContext(stream)
