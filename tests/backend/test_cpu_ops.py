"""NEURON_CPU_OPS, the harness-only knob behind blocker chains: a named op runs on the CPU fallback whatever the
profile decides (a known kernel failure, a precondition, strict mode), and nothing else moves."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import neuron_backend
from neuron_backend import config


@pytest.fixture(autouse=True)
def _no_cpu_ops():
    yield
    neuron_backend.set_cpu_ops(set())


def test_a_known_kernel_failure_runs_on_the_cpu_once_its_op_is_named(dev):
    x = torch.tensor([3, 1, 2], dtype=torch.int32, device=dev)
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError, match="NCC_EVRF013"):
        torch.sort(x)  # integer sort: the device's known failure, no CPU retry (profile trn2)
    neuron_backend.set_cpu_ops({"aten::sort"})
    neuron_backend.reset_fallback_ops()
    assert torch.sort(x).values.cpu().tolist() == [1, 2, 3]
    assert neuron_backend.fallback_ops() == ["aten::sort (Int)"]
    assert neuron_backend.device_info()["cpu_ops"] == ["aten::sort"]
    y = torch.tensor([1.0, 2.0], device=dev)
    assert (y + y).cpu().tolist() == [2.0, 4.0] and neuron_backend.fallback_ops() == ["aten::sort (Int)"]
    neuron_backend.set_cpu_ops(set())
    assert "cpu_ops" not in neuron_backend.device_info()
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError):
        torch.sort(x)


def test_named_ops_run_on_the_cpu_in_strict_mode_too(dev):
    neuron_backend.set_strict(True)
    neuron_backend.set_cpu_ops({"aten::sort"})
    x = torch.tensor([2, 1], dtype=torch.int32, device=dev)
    assert torch.sort(x).values.cpu().tolist() == [1, 2]


def test_the_variable_is_read_at_start_and_a_bad_name_fails_naming_it():
    assert config.parse_cpu_ops(" aten::sort, aten::_grouped_mm ,") == frozenset({"aten::sort", "aten::_grouped_mm"})
    with pytest.raises(ValueError, match="NEURON_CPU_OPS: sort: expected op names such as aten::sort"):
        config.parse_cpu_ops("sort")
    code = ("import torch, neuron_backend; x = torch.tensor([2, 1], dtype=torch.int32, device='neuron'); "
            "print(torch.sort(x).values.tolist(), neuron_backend.fallback_ops())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NEURON_CPU_OPS": "aten::sort"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1, 2] ['aten::sort (Int)']"
