"""``torch.neuron`` streams and events, as FSDP2 uses them: priority streams, the ``stream()`` context, the current
stream per core and thread, and events that order nothing because every device op has finished when it returns.
"""

from __future__ import annotations

import threading

import pytest
import torch

import neuron_backend  # noqa: F401  (registers torch.neuron)


def test_streams_are_torch_streams_of_their_core():
    s = torch.neuron.Stream(priority=-1)
    assert isinstance(s, torch.Stream) and s.device == torch.device("neuron", 0) and s.priority == -1
    assert torch.neuron.Stream(device="neuron:1").device_index == 1
    assert s != torch.neuron.Stream()  # each new stream is distinct
    assert torch.neuron.default_stream() == torch.neuron.default_stream(0)
    # the default stream is the one PyTorch's accelerator API reports for the device
    assert torch.neuron.default_stream() == torch.accelerator.current_stream()


def test_stream_context_selects_and_restores_per_core():
    s0, s1 = torch.neuron.Stream(0), torch.neuron.Stream(1)
    with torch.neuron.stream(s0):
        assert torch.neuron.current_stream() == s0
        with s1:
            assert torch.neuron.current_stream(1) == s1 and torch.neuron.current_stream(0) == s0
        assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    with torch.neuron.stream(None):  # None selects nothing, as torch.cuda.stream(None)
        assert torch.neuron.current_stream() == torch.neuron.default_stream()


def test_current_stream_is_per_thread():
    s = torch.neuron.Stream()
    seen = []
    with torch.neuron.stream(s):
        t = threading.Thread(target=lambda: seen.append(torch.neuron.current_stream()))
        t.start()
        t.join()
    assert seen == [torch.neuron.default_stream()]


def test_set_stream_then_context_restores_the_set_one():
    s, t = torch.neuron.Stream(), torch.neuron.Stream()
    try:
        torch.neuron.set_stream(s)
        with torch.neuron.stream(t):
            assert torch.neuron.current_stream() == t
        assert torch.neuron.current_stream() == s
    finally:
        torch.neuron.set_stream(torch.neuron.default_stream())


def test_events_are_complete_and_time_host_intervals(dev):
    s = torch.neuron.Stream()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record(s)
    x = torch.ones(64, 64, device=dev) @ torch.ones(64, 64, device=dev)
    end.record(s)
    s.wait_event(end)
    torch.neuron.current_stream().wait_stream(s)
    assert end.query() and s.query()
    assert start.elapsed_time(end) >= 0.0
    assert x[0, 0].item() == 64.0  # the work is done when the op returns: nothing to wait for
    recorded = s.record_event()
    assert isinstance(recorded, torch.neuron.Event) and recorded.query()


def test_elapsed_time_needs_timing_and_records():
    a, b = torch.neuron.Event(), torch.neuron.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        a.elapsed_time(b)
    c, d = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        c.elapsed_time(d)


def test_pytorch_cpp_reads_a_neuron_event_as_an_event(dev):
    # FSDP2's finalize_backward waits on its all-gather event through torch.accelerator's C++ stream
    # (torch 2.13 _fsdp_param_group.py); the real event is a THPEvent in memory (torch_neuronx/csrc/Stream.h).
    # Before, a plain Python event was read as garbage there: "Unknown device: <n>".
    event = torch.neuron.Event()
    event.record()
    stream = torch.accelerator.current_stream()
    assert stream.device_type == 20  # c10::DeviceType::PrivateUse1, which "neuron" names
    stream.wait_event(event)  # returns: every op has finished when it returns
    torch.neuron.current_stream().wait_event(event)
    assert event.query()
