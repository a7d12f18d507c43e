"""The op table in eager use: ops without a Neuron implementation fall back to the CPU (recorded) or, in strict mode,
raise the typed error naming op, dtypes, shapes and the source; unsupported ops and rejected dtypes always raise.
"""

from __future__ import annotations

import pickle
import warnings

import pytest
import torch

import neuron_backend
from neuron_backend import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError, policy
from neuron_backend.config import CONFIG


@pytest.fixture
def fallback_on():
    """The vendor's default (CPU fallback allowed); set explicitly until the device's config default lands."""
    neuron_backend.set_cpu_fallback(True)
    neuron_backend.reset_fallback_ops()
    yield
    neuron_backend.reset_fallback_ops()


@pytest.fixture
def strict():
    neuron_backend.set_cpu_fallback(False)
    neuron_backend.reset_fallback_ops()


def test_op_without_neuron_implementation_falls_back_and_is_recorded_once(dev, fallback_on):
    probs = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = torch.multinomial(probs.to("neuron"), 1)
        torch.multinomial(probs.to("neuron"), 1)
    # one-hot rows: the sample is deterministic, so device and CPU must agree exactly
    assert first.device == dev and first.cpu().flatten().tolist() == [1, 2]
    assert neuron_backend.fallback_ops() == ["aten::multinomial (Float)"]
    assert sum("aten::multinomial" in str(w.message) for w in caught) == 1


def test_strict_mode_raises_the_typed_error_with_op_dtypes_shapes_and_source(dev, strict):
    with pytest.raises(NeuronUnsupportedOpError) as info:
        torch.multinomial(torch.ones(2, 3, device="neuron"), 1)
    e = info.value
    assert (e.op, e.dtypes, e.shapes) == ("aten::multinomial", ("Float",), ((2, 3),))
    assert "NeuronBindings.cpp" in e.reason and "strict mode" in e.reason
    assert pickle.loads(pickle.dumps(e)).op == "aten::multinomial"
    assert neuron_backend.fallback_ops() == []


def test_explicit_cpu_fallback_registration_is_a_fallback(dev, fallback_on):
    a = torch.randn(4, 4)
    q, _ = torch.linalg.qr(a.to("neuron"))
    # LAPACK runs on the host either way: the same kernel, bit-identical
    assert torch.equal(q.cpu(), torch.linalg.qr(a)[0])
    assert "aten::linalg_qr (Float)" in neuron_backend.fallback_ops()


@pytest.mark.parametrize("fn", [
    lambda x: torch.nonzero(x > 0),
    lambda x: x[x > 0],
    lambda x: torch.masked_select(x, x > 0),
    lambda x: torch.repeat_interleave(x, torch.tensor([1, 2, 1, 0], device=x.device), dim=0),
])
def test_data_dependent_shape_ops_are_native_on_trn2(dev, strict, fn):
    x = torch.tensor([[1.0, -1.0], [2.0, 3.0], [-4.0, 5.0], [6.0, -7.0]])
    got = fn(x.to("neuron"))
    assert got.device == dev and torch.equal(got.cpu(), fn(x))
    assert neuron_backend.fallback_ops() == []


def test_unsupported_op_raises_even_with_fallback_allowed(dev, fallback_on):
    with pytest.raises(NeuronUnsupportedOpError) as info:
        torch.quantize_per_tensor(torch.randn(3).to("neuron"), 0.1, 0, torch.qint8)
    e = info.value
    assert e.op == "aten::quantize_per_tensor" and e.dtypes == ("Float",) and e.shapes == ((3,),)
    assert "not supported on Neuron" in e.reason and "supported-operators" in e.reason
    assert neuron_backend.fallback_ops() == []


def test_fnuz_fp8_is_rejected_always_and_ocp_fp8_runs_in_eager(dev, fallback_on):
    x = torch.randn(3).to("neuron")
    with pytest.raises(NeuronUnsupportedDtypeError) as info:
        x.to(torch.float8_e4m3fnuz)
    assert "EVRF005" in info.value.reason
    for fp8 in (torch.float8_e4m3fn, torch.float8_e5m2):  # real Trn2 eager runs both (whn09/xpu-perf)
        assert x.to(fp8).dtype == fp8
    for dt in (torch.float64, torch.int64, torch.bfloat16):
        assert x.to(dt).dtype == dt  # held on the device (64-bit computed as 32-bit by input autocast)
    assert torch.zeros(2, dtype=torch.float64, device="neuron").device == dev


def test_integer_matmul_falls_back_or_is_a_dtype_error_in_strict_mode(dev, fallback_on):
    a = torch.arange(4, dtype=torch.int32).reshape(2, 2)
    assert torch.equal(torch.mm(a.to("neuron"), a.to("neuron")).cpu(), torch.mm(a, a))
    assert neuron_backend.fallback_ops() == ["aten::mm (Int)"]
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(NeuronUnsupportedDtypeError, match="aten::mm"):
        torch.mm(a.to("neuron"), a.to("neuron"))


def test_float_histc_is_native_integer_histc_falls_back(dev, fallback_on):
    x = torch.tensor([0.0, 1.0, 1.0, 3.0])
    assert torch.equal(torch.histc(x.to("neuron"), bins=4).cpu(), torch.histc(x, bins=4))
    assert neuron_backend.fallback_ops() == []
    assert policy.active().classification("aten::histc") == "native"
    assert "cpu fallback" in policy.explain(torch.ops.aten.histc.default, [torch.int32])
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(NeuronUnsupportedDtypeError) as info:
        torch.histc(torch.tensor([0, 1, 1, 3], dtype=torch.int32, device="neuron"), bins=4)
    assert info.value.op == "aten::histc" and info.value.dtypes == ("Int",)


def test_composite_op_decomposes_into_decided_ops(dev, fallback_on):
    # randn has a CompositeExplicitAutograd kernel (empty + normal_): normal_ has no Neuron implementation
    torch.manual_seed(0)
    x = torch.empty(3, device="neuron").normal_()
    assert x.device == dev and "aten::normal_ (Float)" in neuron_backend.fallback_ops()
    assert policy.explain(torch.ops.aten.celu.default, [torch.float32]) == "decomposed"


def test_legacy_xla_runs_page_ops_natively_and_falls_back_otherwise(dev, fallback_on):
    x = torch.randn(4, 4).to("neuron")
    neuron_backend.set_profile("legacy-xla")  # restored by conftest
    assert torch.relu(x).device == dev and neuron_backend.fallback_ops() == []  # on the page
    assert torch.equal(torch.amax(x, 0).cpu(), torch.amax(x.cpu(), 0))
    assert neuron_backend.fallback_ops() == ["aten::amax (Float)"]
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(NeuronUnsupportedOpError) as info:
        torch.amax(x, 0)
    assert info.value.op == "aten::amax" and "legacy-xla" in str(info.value)


def test_unknown_profile_name_is_rejected(dev):
    with pytest.raises(ValueError, match="valid profiles: legacy-xla, trn2, trn3"):
        neuron_backend.set_profile("published-ops")
    assert CONFIG.profile in ("trn2", "trn3", "legacy-xla")
