"""The device's decisions while tracing on fake tensors (neuron_backend/tracing.py): an op the device rejects on
fake device data is a graph break carrying the typed error, and a settings change is not hidden by FakeTensorMode's
dispatch cache."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode, UnsupportedOperatorException

import neuron_backend


def test_a_rejected_op_on_fake_device_data_breaks_the_graph_and_follows_the_setting(dev):
    mode = FakeTensorMode()
    fx = mode.from_tensor(torch.tensor([3, 1, 2], device=dev, dtype=torch.int32))
    with mode:
        # integer histc has no device kernel: the CPU fallback runs it, so tracing goes on
        assert torch.histc(fx, bins=2, min=0, max=3).shape == (2,)
        neuron_backend.set_strict(True)  # the same call now rejected, although FakeTensorMode cached its result
        with pytest.raises(UnsupportedOperatorException) as info:
            torch.histc(fx, bins=2, min=0, max=3)
        assert (info.value.neuron_error.op, info.value.neuron_error.dtypes) == ("aten::histc", ("Int",))
        assert isinstance(info.value.neuron_error, neuron_backend.NeuronUnsupportedOpError)
        with pytest.raises(UnsupportedOperatorException):
            torch.histc(fx[1:], bins=2, min=0, max=3)  # a view of device data is device data
        # a tensor the traced region makes itself is left to the compile backend's graph check, as under the
        # wrapper subclass the core replaced
        made = torch.ones(3, device=dev, dtype=torch.int32)
        assert torch.histc(made, bins=2, min=0, max=3).shape == (2,)
