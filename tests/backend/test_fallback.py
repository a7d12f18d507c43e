"""The CPU fallback runs what the device rejected, even where the host kernel lacks the dtype (integer histc):
by the op's decomposition or in a wider dtype cast back; other host errors and mutating ops keep their error.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import neuron_backend
from neuron_backend import fallback

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_histc_falls_back_and_keeps_its_dtype(dev, dtype):
    neuron_backend.set_cpu_fallback(True)
    values = torch.tensor([0, 2, 1, 2, 2, 5], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.histc(values.to(dev), bins=3, min=0, max=2)
    assert got.device.type == "neuron" and got.dtype == dtype
    # Counts are exact: the wider dtype (float64) holds every int32 value exactly; 5 lies outside [0, 2].
    assert torch.equal(got.cpu(), torch.tensor([1, 1, 3], dtype=dtype))
    name = "Int" if dtype == torch.int32 else "Long"
    assert f"aten::histc ({name})" in neuron_backend.fallback_ops()


def test_host_errors_other_than_a_missing_kernel_are_raised_unchanged():
    with pytest.raises(RuntimeError, match="must match the size"):
        fallback.run_on_host(aten.add.Tensor, [torch.ones(2), torch.ones(3)], {})


def test_mutating_ops_are_not_widened():
    # A widened copy would not write into ``out``: the host's own missing-kernel error stands.
    values, out = torch.tensor([0, 1], dtype=torch.int32), torch.empty(2, dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
        fallback.run_on_host(aten.histc.out, [values], {"bins": 2, "out": out})


def test_widening_casts_back_only_outputs_of_the_wide_dtype():
    # min on int32 with indices: values come back as int32, indices stay int64 (aten.min.dim has an int kernel, so
    # widening is called directly here to test the cast-back rule).
    (out,) = fallback._widened(aten.min.dim, [torch.tensor([[3, 1, 2]], dtype=torch.int32), 1], {})
    values, indices = out
    assert values.dtype == torch.int32 and indices.dtype == torch.int64
    assert values.tolist() == [1] and indices.tolist() == [1]
