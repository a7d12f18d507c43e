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


@pytest.mark.parametrize("decompose", [True, False])
def test_complex_multiply_backward_matches_the_cpu(dev, decompose):
    # Complex mul's backward is grad * other.conj(): a lazy conjugate view. Host kernels run inside
    # __torch_dispatch__ without the Conjugate key, so an unmaterialized bit was dropped and the gradient came back
    # with real and imaginary parts swapped/sign-flipped (Llama4's rotary embedding, train check, cosine 0.93).
    # Decomposed (TORCH_NEURONX_COMPLEX_DECOMPOSE=1, default) the complex ops run on the device; otherwise they fall
    # back to the CPU. Both must match.
    neuron_backend.set_cpu_fallback(True)
    neuron_backend.set_complex_decompose(decompose)
    torch.manual_seed(0)
    a, b = torch.randn(4, 2), torch.randn(4, 2)

    def grad_on(device: str) -> torch.Tensor:
        x = a.clone().to(device).requires_grad_()
        out = torch.view_as_real(torch.view_as_complex(x) * torch.view_as_complex(b.to(device)))
        out.sum(dim=-1).pow(2).sum().backward()
        return x.grad.cpu()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = grad_on(dev)
    # fp32 on both sides, same host kernels: equal up to summation order (1e-6 relative).
    torch.testing.assert_close(got, grad_on("cpu"), rtol=1e-6, atol=1e-6)
    complex_fallbacks = [e for e in neuron_backend.fallback_ops() if "Complex" in e]
    assert (complex_fallbacks == []) if decompose else ("aten::mul (ComplexFloat)" in complex_fallbacks)


def test_lazy_conjugate_and_negative_views_carry_their_values_on_the_device(dev, exact_numerics):
    neuron_backend.set_cpu_fallback(True)
    x = torch.tensor([1.5, -2.0, 3.25])
    neg = torch._neg_view(x.to(dev))  # native view: the device returns it materialized
    assert not neg._data.is_neg()
    assert torch.equal((neg + 0).cpu(), -x)
    c = torch.view_as_complex(torch.tensor([[1.0, 2.0], [3.0, -4.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conj = torch.ops.aten._conj(c.to(dev))  # complex: through the fallback
        prod = (c.to(dev) * conj).cpu()
    assert torch.equal(prod, c * c.conj())  # |c|^2: 5 and 25, imaginary parts exactly 0
