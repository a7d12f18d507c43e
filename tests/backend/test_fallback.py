"""The CPU fallback runs what the device rejected, even where the host kernel lacks the dtype (integer histc):
by the op's decomposition or in a wider dtype cast back; other host errors and mutating ops keep their error.
"""

from __future__ import annotations

import sys
import warnings

import pytest
import torch
from concurrent_scripts import run_copies

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
    assert not neg.is_neg()  # the device tensor is its data: it holds the values, no lazy negative bit
    assert torch.equal((neg + 0).cpu(), -x)
    c = torch.view_as_complex(torch.tensor([[1.0, 2.0], [3.0, -4.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conj = torch.ops.aten._conj(c.to(dev))  # complex: through the fallback
        prod = (c.to(dev) * conj).cpu()
    assert torch.equal(prod, c * c.conj())  # |c|^2: 5 and 25, imaginary parts exactly 0


def test_fallback_is_on_by_default_and_warns_once_per_op(dev):
    # The vendor's default: "Unsupported ops fall back to CPU by default" (AWS Neuron docs,
    # torch/reference/best-practices-pytorch-neuron); one warning per op however many dtypes fall back.
    from neuron_backend.config import load

    assert load().cpu_fallback is True
    neuron_backend.clear_op_tracking()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.histc(torch.tensor([0, 1, 1], dtype=torch.int32).to(dev), bins=2, min=0, max=1)
        torch.histc(torch.tensor([0, 1, 1], dtype=torch.int16).to(dev), bins=2, min=0, max=1)
    assert [str(w.message).split("'")[1] for w in caught if "fell back" in str(w.message)] == ["aten::histc"]
    assert neuron_backend.fallback_ops() == ["aten::histc (Int)", "aten::histc (Short)"]
    # torch-neuronx's names for the record: op names only, and the ops that ran on the device.
    assert neuron_backend.get_fallback_ops() == ["aten::histc"]
    torch.ones(2, device=dev).add(1)
    assert "aten::add" in neuron_backend.get_executed_ops()
    neuron_backend.clear_op_tracking()
    assert neuron_backend.get_fallback_ops() == [] and neuron_backend.get_executed_ops() == []


def test_strict_mode_falls_back_nothing_and_names_the_op(dev):
    neuron_backend.set_strict(True)
    probs = torch.tensor([[0.2, 0.8]], device=dev)
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError) as info:
        torch.multinomial(probs, 1)
    assert info.value.op == "aten::multinomial" and neuron_backend.fallback_ops() == []
    neuron_backend.set_strict(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.multinomial(probs, 1)  # sampling generate's op runs by default
    assert got.device == dev and got.cpu().item() in (0, 1)
    assert neuron_backend.get_fallback_ops() == ["aten::multinomial"]


_STRICT_BACKWARD = """
import torch, neuron_backend
neuron_backend.set_strict(True)
x = torch.ones(4, 4).to("neuron").requires_grad_()
y = x * 2
y[0:2] += 1  # an in-place op on a view: its backward is autograd's C++ CopySlices node
try:
    y.sum().backward()  # CopySlices calls new_empty_strided, which trn2 runs on the CPU: refused in strict mode
    x.grad.cpu()
except neuron_backend.NeuronUnsupportedOpError as exc:
    print("raised", exc.op, "CopySlices" in " ".join(getattr(exc, "__notes__", [])))
"""


def test_strict_error_inside_a_cpp_backward_node_is_raised_not_an_abort():
    # Raised inside the C++ node, the error aborted the process (PyTorch's Python device guard calls into Python
    # from a noexcept destructor while unwinding). It must reach the caller, typed, naming the op and the node. The
    # C++ core's guard (csrc/) runs no Python there, so backward raises it at the op, as the real backend does.
    # In a subprocess, so a regression fails this test instead of killing the suite.
    # Six copies at once: exiting right after such a backward also aborted ~1 run in 7 (in Py_FinalizeEx, the
    # engine's device thread releasing Python state; neuron_backend/teardown.py), more often on a busy machine.
    # Six concurrent runs met it with probability ~60% before the fix; a failure shows which copy and its stderr.
    for done in run_copies(_STRICT_BACKWARD, 6, workers=6):
        assert done.stdout.strip().splitlines()[-1] == "raised aten::new_empty_strided True", done.stdout


def test_the_torch_neuronx_module_is_the_simulations_and_tracks_the_same_record():
    """The registered simulation's stand-in (never a real install's: test_autoload.py) carries the real package's
    op-tracking names, reading the same record as neuron_backend's."""
    import torch_neuronx

    assert torch_neuronx is sys.modules["torch_neuronx"] and torch_neuronx.SIMULATED
    torch_neuronx.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one-per-op fallback warning
        torch.histc(torch.tensor([0, 1, 1], dtype=torch.int32).to("neuron"), bins=2, min=0, max=1)
    assert torch_neuronx.get_fallback_ops() == neuron_backend.get_fallback_ops() == ["aten::histc"]


@pytest.fixture
def failing_cumsum(monkeypatch):
    """The active profile with a known issue saying aten::cumsum's device kernel fails at execution."""
    import dataclasses

    from neuron_backend.config import CONFIG
    from neuron_backend.hardware import profiles

    issue = profiles.KnownIssue(op="aten::cumsum", reason="test: the kernel fails", source="this test")
    patched = dataclasses.replace(profiles.load(CONFIG.profile), kernel_failures={"aten::cumsum": issue})
    monkeypatch.setattr(profiles, "load", lambda name, switches=(): patched)
    neuron_backend.clear_op_tracking()  # drops cached decisions


def test_a_failing_kernel_is_retried_on_the_cpu_unless_told_not_to(dev, failing_cumsum):
    # torch-neuronx re-runs a native op whose kernel fails on the CPU unless
    # TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 (docs/environment_variables.md, pre-beta source).
    x = torch.arange(4.0, device=dev)
    with pytest.warns(UserWarning, match="aten::cumsum' fell back to CPU .kernel failed"):
        got = torch.cumsum(x, 0)
    assert got.cpu().tolist() == [0.0, 1.0, 3.0, 6.0]
    assert neuron_backend.fallback_reasons()["aten::cumsum (Float)"].startswith("kernel failed: test: the kernel")
    neuron_backend.set_fallback_only_for_unimplemented(True)
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError, match="the kernel fails"):
        torch.cumsum(x, 0)
    neuron_backend.set_fallback_only_for_unimplemented(False)
    neuron_backend.set_strict(True)
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError, match="the kernel fails"):
        torch.cumsum(x, 0)
