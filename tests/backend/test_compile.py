"""The ``neuron`` torch.compile backend: supported graphs run and match eager, recompilations are counted, graphs with
ops outside the table are rejected with the typed error (eagerly after a graph break, or by the op-table check).
"""

from __future__ import annotations

import pytest
import torch

import neuron_backend
from neuron_backend import NeuronUnsupportedOpError, compile_backend


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    neuron_backend.reset_compile_stats()
    yield
    torch._dynamo.reset()


def test_supported_graph_matches_eager_and_trains(dev):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 2)).to("neuron")
    cm = torch.compile(m, backend="neuron")
    x = torch.randn(4, 8, device="neuron")
    out = cm(x)
    assert out.device == dev
    # Both paths apply the same bf16 operand rounding; only fp32 accumulation order may differ: 1e-5.
    torch.testing.assert_close(out.detach().cpu(), m(x).detach().cpu(), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert m[0].weight.grad.device == dev
    stats = neuron_backend.compile_stats()
    assert stats["compilations"] == 1 and stats["recompilations"] == 0 and stats["graphs"] == 2  # fw + bw


def test_new_static_shape_counts_a_recompilation(dev):
    f = torch.compile(lambda x: (x * 2).sum(), backend="neuron")
    f(torch.randn(3, device="neuron"))
    f(torch.randn(5, device="neuron"))
    assert neuron_backend.compile_stats()["recompilations"] == 1
    neuron_backend.reset_compile_stats()
    assert neuron_backend.compile_stats() == {"compilations": 0, "recompilations": 0, "graphs": 0}


def test_unsupported_op_in_compiled_function_raises_typed_error(dev):
    f = torch.compile(lambda x: torch.nonzero(x > 0) + 1, backend="neuron")
    with pytest.raises(NeuronUnsupportedOpError) as info:
        f(torch.randn(4, device="neuron"))
    assert info.value.op == "aten::nonzero"


def test_op_table_check_rejects_a_lowered_graph():
    def g(x):
        return torch.ops.aten.nonzero.default(x)

    gm = torch.fx.experimental.proxy_tensor.make_fx(g)(torch.ones(3))
    with pytest.raises(NeuronUnsupportedOpError) as info:
        compile_backend.check_graph(gm)
    assert info.value.op == "aten::nonzero" and info.value.dtypes == ("Float",)
    ok = torch.fx.experimental.proxy_tensor.make_fx(lambda x: x.relu() + 1)(torch.ones(3))
    compile_backend.check_graph(ok)


def test_unwrap_error_finds_typed_error_in_wrappers():
    inner = NeuronUnsupportedOpError("aten::nonzero", ["Float"], [(3,)])
    try:
        try:
            raise inner
        except NeuronUnsupportedOpError as e:
            raise RuntimeError("backend failed") from e
    except RuntimeError as outer:
        assert neuron_backend.unwrap_error(outer) is inner
    assert neuron_backend.unwrap_error(ValueError("x")) is None


def test_op_outside_the_table_in_a_device_graph_is_rejected_by_the_backend(dev):
    # A factory made on the device inside the compiled region never reaches the device's dispatcher while Dynamo
    # traces (it is a plain fake neuron tensor), so only the backend's op-table check can reject cummax: Dynamo then
    # wraps the typed error in BackendCompilerFailed, and unwrap_error finds it.
    torch._dynamo.reset()
    f = torch.compile(lambda x: x + torch.cummax(torch.arange(4.0, device="neuron"), 0).values, backend="neuron")
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        f(torch.ones(4, device="neuron"))
    err = neuron_backend.unwrap_error(info.value)
    assert isinstance(err, NeuronUnsupportedOpError) and err.op == "aten::cummax" and err.dtypes == ("Float",)
    torch._dynamo.reset()
