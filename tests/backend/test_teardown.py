"""Process exit after backward on the device (neuron_backend/teardown.py): the engine's device threads are drained
so interpreter shutdown never aborts, and the drain leaves no trace a caller could see."""

from __future__ import annotations

import atexit

import pytest
import torch
from concurrent_scripts import run_copies
from test_fallback import _STRICT_BACKWARD

import neuron_backend  # noqa: F401 - registers the device
from neuron_backend import teardown

# The importing thread runs backward in itself (registration.py: autograd multithreading off there), so the engine's
# device thread serves only other threads' backwards: the case the exit drain exists for.
_BACKWARD_THEN_EXIT = """
import threading, torch, neuron_backend
x = torch.randn(8, 8, device="neuron", requires_grad=True)
t = threading.Thread(target=lambda: (x @ x).sum().backward())
t.start(); t.join()
print(x.grad.device)
"""


def test_the_drain_runs_on_the_engine_thread_and_leaves_no_gradient_or_held_error(dev):
    x = torch.ones(2, device=dev, requires_grad=True)
    (x * 3).sum().backward()  # starts the engine's thread for device index 0
    kept = len(teardown._KEEP)
    assert teardown.drain_device_threads(1) == 1
    assert len(teardown._KEEP) == kept + 3  # leaf, output, seed: kept alive to the end of the process
    assert x.grad.cpu().tolist() == [3.0, 3.0]  # the caller's own gradients are untouched
    assert (torch.ones(1, device=dev) + 1).cpu().tolist() == [2.0]  # and no error held for the next device op


def test_the_drain_stops_at_a_core_with_no_engine_thread():
    # The engine's thread pool is sized by the device guard's count; asking past it raises inside the engine, which
    # the drain takes as "no more threads" instead of failing the exit.
    drained = teardown.drain_device_threads(64)
    assert 1 <= drained < 64


def test_registration_installs_the_exit_drain_once():
    before = atexit._ncallbacks()
    teardown.register()  # registration.register() already did: a second call adds nothing
    assert atexit._ncallbacks() == before
    assert teardown._registered == [True]


def test_backward_then_exit_never_aborts():
    # Before the drain this aborted (exit 134, std::terminate in Py_FinalizeEx) about 1 run in 60 alone and more
    # under load: 2 of 120 with four at a time on this machine kind (bench/README.md, "Exit after backward"). Four
    # concurrent runs are the cheap check here; the slow test below runs the strict scenario 60 times.
    for done in run_copies(_BACKWARD_THEN_EXIT, 4):
        assert done.stdout.split() == ["neuron:0"], done.stdout


@pytest.mark.slow
def test_the_strict_backward_scenario_sixty_times_never_aborts():
    # Issue 19's acceptance (>= 50 runs; ~45 s of CPU, so outside `make test`: `pytest -m slow` runs it). Before the
    # drain the same loop aborted 3 of 80 (bench/README.md, "Exit after backward").
    run_copies(_STRICT_BACKWARD, 60, timeout=600)
