"""The ``neuron`` torch.compile backend as TorchNeuron documents it: supported graphs match eager, each new shape
recompiles, dynamic=True is refused, graph breaks (``.item()``) are allowed and counted and fullgraph=True raises on
them, and a graph that fails to compile (unsupported op; in strict mode also an op without a Neuron kernel) raises
or runs eagerly per TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION.
"""

from __future__ import annotations

import pytest
import torch

import neuron_backend
from neuron_backend import NeuronUnsupportedOpError, compile_backend
from neuron_backend.config import CONFIG


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    compile_backend.reset()
    yield
    torch._dynamo.reset()


def test_supported_graph_matches_eager_and_trains(dev):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 2)).to("neuron")
    cm = torch.compile(m, backend="neuron")
    x = torch.randn(4, 8).to("neuron")
    out = cm(x)
    assert out.device == dev
    # Both paths apply the same bf16 operand rounding; only fp32 accumulation order may differ: 1e-5.
    torch.testing.assert_close(out.detach().cpu(), m(x).detach().cpu(), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert m[0].weight.grad.device == dev
    report = compile_backend.compile_report()
    assert report["compilations"] == 1 and report["recompilations"] == 0 and report["graphs"] == 2  # fw + bw
    assert report["graph_breaks"] == 0 and report["eager_fallbacks"] == 0


def test_each_new_shape_counts_a_recompilation(dev):
    f = torch.compile(lambda x: (x * 2).sum(), backend="neuron")
    for n in (3, 5, 7, 5):
        assert f(torch.ones(n).to("neuron")).item() == 2 * n
    # 3 new shapes after the first: the docs say each new shape recompiles (Dynamo may make the graph
    # shape-generic after the first change; the backend still counts one compilation per concrete shape)
    assert compile_backend.compile_report()["recompilations"] == 2
    compile_backend.reset()
    assert neuron_backend.compile_stats() == {"compilations": 0, "recompilations": 0, "graphs": 0}


def test_dynamic_true_is_refused_with_a_clear_error(dev):
    f = torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        f(torch.ones(3).to("neuron"))
    inner = info.value.inner_exception
    assert isinstance(inner, compile_backend.NeuronDynamicShapesError)
    assert "dynamic=True" in str(inner) and "recompiling per new shape" in str(inner)


def _item_graph(x):
    scale = x.abs().max().item()  # a host read: Dynamo breaks the graph here
    return x / scale


def test_item_is_a_graph_break_counted_not_a_rejection(dev):
    x = torch.tensor([1.0, -4.0, 2.0])
    got = torch.compile(_item_graph, backend="neuron")(x.to("neuron"))
    assert torch.equal(got.cpu(), _item_graph(x))
    assert compile_backend.graph_breaks() >= 1


def test_item_under_fullgraph_is_captured_and_allowed_by_the_backend(dev):
    # With fullgraph=True Dynamo keeps .item() in the graph (aten::_local_scalar_dense): the backend must not
    # reject a host read.
    x = torch.tensor([1.0, -4.0, 2.0])
    got = torch.compile(_item_graph, backend="neuron", fullgraph=True)(x.to("neuron"))
    assert torch.equal(got.cpu(), _item_graph(x)) and compile_backend.graph_breaks() == 0


def _broken_graph(x):
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1


def test_graph_breaks_give_separate_graphs_and_fullgraph_raises_on_them(dev):
    x = torch.ones(3).to("neuron")
    assert torch.equal(torch.compile(_broken_graph, backend="neuron")(x).cpu(), torch.full((3,), 3.0))
    report = compile_backend.compile_report()
    assert report["graph_breaks"] == 1 and report["graphs"] == 2
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(_broken_graph, backend="neuron", fullgraph=True)(x)


def _erfc_graph(x):
    # A factory made inside the compiled region stays a fake tensor while Dynamo traces, so erfc (no Neuron
    # implementation in trn2, no core-aten decomposition) reaches the backend's compile check.
    return x + torch.erfc(torch.arange(4.0, device="neuron"))


def _quantize_graph(x):
    return x + torch.quantize_per_tensor(torch.arange(4.0, device="neuron"), 0.1, 0, torch.qint8).dequantize()


def test_op_without_neuron_implementation_compiles_when_fallback_is_allowed(dev):
    neuron_backend.set_cpu_fallback(True)
    got = torch.compile(_erfc_graph, backend="neuron")(torch.ones(4).to("neuron"))
    assert torch.equal(got.cpu(), _erfc_graph_cpu())  # the host kernel runs either way: bit-identical
    assert compile_backend.compile_report()["eager_fallbacks"] == 0


def _erfc_graph_cpu():
    return torch.ones(4) + torch.erfc(torch.arange(4.0))


@pytest.mark.parametrize("fallback", [True, False])
def test_graph_that_fails_to_compile_raises_by_default(dev, fallback):
    # unsupported ops (quantized: the docs' N) fail to compile always; ops without a Neuron kernel in strict mode
    assert compile_backend.disable_fallback_execution() is True  # TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION default
    neuron_backend.set_cpu_fallback(fallback)
    cases = [(_quantize_graph, "aten::quantize_per_tensor")] + ([] if fallback else [(_erfc_graph, "aten::erfc")])
    for fn, op in cases:
        torch._dynamo.reset()
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
            torch.compile(fn, backend="neuron")(torch.ones(4).to("neuron"))
        err = neuron_backend.unwrap_error(info.value)
        assert isinstance(err, NeuronUnsupportedOpError) and err.op == op and err.dtypes == ("Float",)


def test_graph_that_fails_to_compile_runs_eagerly_when_fallback_execution_is_off(dev, monkeypatch):
    monkeypatch.setattr(CONFIG, "disable_fallback_execution", False, raising=False)
    neuron_backend.set_cpu_fallback(False)
    # The compile check fails but no BackendCompilerFailed: the graph runs op by op, where strict mode's eager
    # error names the op.
    with pytest.raises(NeuronUnsupportedOpError) as info:
        torch.compile(_erfc_graph, backend="neuron")(torch.ones(4).to("neuron"))
    assert info.value.op == "aten::erfc"
    assert compile_backend.compile_report()["eager_fallbacks"] == 1


def test_compile_check_on_lowered_graphs():
    make_fx = torch.fx.experimental.proxy_tensor.make_fx
    compile_backend.check_graph(make_fx(lambda x: torch.nonzero(x) + 1)(torch.ones(3)))  # native on trn2
    erfc = make_fx(lambda x: torch.erfc(x))(torch.ones(3))
    neuron_backend.set_cpu_fallback(True)
    compile_backend.check_graph(erfc)  # no Neuron kernel: taken as lowered when fallback is allowed
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(NeuronUnsupportedOpError) as info:
        compile_backend.check_graph(erfc)
    assert info.value.op == "aten::erfc" and info.value.dtypes == ("Float",) and "strict mode" in info.value.reason
    g = torch.fx.Graph()
    g.output(g.call_function(torch.ops.aten.int_repr.default, (g.placeholder("x"),)))
    with pytest.raises(NeuronUnsupportedOpError, match="not supported on Neuron"):  # quantized: the docs' N class
        compile_backend.check_graph(torch.fx.GraphModule(torch.nn.Module(), g))


def test_unwrap_error_finds_typed_error_in_wrappers():
    inner = NeuronUnsupportedOpError("aten::erfc", ["Float"], [(3,)])
    try:
        try:
            raise inner
        except NeuronUnsupportedOpError as e:
            raise RuntimeError("backend failed") from e
    except RuntimeError as outer:
        assert neuron_backend.unwrap_error(outer) is inner
    assert neuron_backend.unwrap_error(ValueError("x")) is None
