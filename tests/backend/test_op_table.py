"""The op table as data: shipped profiles, cited restrictions, typed errors with op/dtypes/shapes, decomposition,
the published-ops profile, int64 handling and the CPU fallback's record.
"""

from __future__ import annotations

import pickle
import warnings

import pytest
import torch

import neuron_backend
from neuron_backend import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError, policy, profiles


def test_profiles_ship_and_cite_their_sources():
    assert {"torchneuron", "published-ops"} <= set(profiles.available())
    for name in profiles.available():
        prof = profiles.load(name)
        assert prof.ops and prof.confidence
        assert torch.float64 in prof.forbidden and torch.complex64 in prof.forbidden
        for r in prof.restrictions.values():
            assert "docs" in r.source.lower() or "kernels" in r.source.lower(), r
        for src in prof.forbidden.values():
            assert "AWS Neuron docs" in src
    assert len(profiles.load("published-ops").ops) < len(profiles.load("torchneuron").ops)


def test_unsupported_dtype_error_names_op_dtypes_shapes(dev):
    with pytest.raises(NeuronUnsupportedDtypeError) as info:
        torch.histc(torch.arange(8, device="neuron"), bins=4)
    e = info.value
    assert (e.op, e.dtypes, e.shapes) == ("aten::histc", ("Long",), ((8,),))
    assert "aten::histc" in str(e) and "Long" in str(e) and "[8]" in str(e)
    assert isinstance(e, NeuronUnsupportedOpError) and isinstance(e, RuntimeError)
    assert pickle.loads(pickle.dumps(e)).op == "aten::histc"


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: torch.nonzero(x > 0), "aten::nonzero"),
        (lambda x: x[x > 0], "aten::index"),
        (lambda x: torch.masked_select(x, x > 0), "aten::masked_select"),
        (lambda x: torch.unique(x), "aten::_unique2"),
    ],
)
def test_data_dependent_shapes_are_unsupported_ops(dev, fn, op):
    with pytest.raises(NeuronUnsupportedOpError) as info:
        fn(torch.randn(4, 4, device="neuron"))
    assert type(info.value) is NeuronUnsupportedOpError and info.value.op == op
    assert "data-dependent" in str(info.value)


def test_float64_and_complex_cannot_live_on_the_device(dev):
    x = torch.randn(3, device="neuron")
    for make in (lambda: x.double(), lambda: torch.zeros(2, dtype=torch.float64, device="neuron"),
                 lambda: torch.ones(2, dtype=torch.complex64).to("neuron"), lambda: x.sum(dtype=torch.float64)):
        with pytest.raises(NeuronUnsupportedDtypeError):
            make()


def test_integer_matmul_is_a_dtype_error(dev):
    a = torch.ones(2, 2, dtype=torch.int32, device="neuron")
    with pytest.raises(NeuronUnsupportedDtypeError, match="aten::mm"):
        torch.mm(a, a)


def test_ops_outside_the_table_are_decomposed(dev, exact_numerics):
    op = torch.ops.aten.hardshrink.default
    assert policy.active().native_dtypes("aten::hardshrink") is None
    assert policy.explain(op, [torch.float32]) == "decomposed"
    x = torch.tensor([-1.0, -0.2, 0.3, 2.0])
    # the decomposition (where/abs/gt) computes the same values exactly
    assert torch.equal(torch.nn.functional.hardshrink(x.to("neuron")).cpu(), torch.nn.functional.hardshrink(x))


def test_undecomposable_error_names_the_lowered_op(dev):
    with pytest.raises(NeuronUnsupportedOpError) as info:
        torch.special.i0(torch.randn(3, device="neuron"))
    assert info.value.op == "aten::i0" and "prims::bessel_i0" in info.value.reason


def test_published_ops_profile_is_narrower(dev):
    x = torch.randn(4, 4, device="neuron")
    assert torch.amax(x, 0).device == dev  # native in torchneuron
    neuron_backend.set_profile("published-ops")
    assert torch.relu(x).device == dev  # listed on the published page
    with pytest.raises(NeuronUnsupportedOpError) as info:
        torch.amax(x, 0)
    assert info.value.op == "aten::amax" and "published-ops" in str(info.value)


def test_int64_is_lowered_to_int32(dev):
    big = torch.tensor([2**40 + 3, 5])
    assert torch.tensor([2**40 + 3, 5], device="neuron").cpu().tolist() == [3, 5]
    assert big.to("neuron").cpu().tolist() == [3, 5]
    x = torch.tensor([2**31 - 1], device="neuron")
    assert (x + 1).cpu().tolist() == [-(2**31)]  # wraps like int32 arithmetic
    assert torch.arange(3, device="neuron").dtype == torch.int64  # dtype kept; values are int32-ranged


def test_cpu_fallback_runs_and_records_once_per_op(dev):
    neuron_backend.set_cpu_fallback(True)
    neuron_backend.reset_fallback_ops()
    x = torch.tensor([0.0, 1.0, -2.0, 3.0], device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = torch.nonzero(x)
        torch.nonzero(x)
    assert first.device == dev and first.cpu().flatten().tolist() == [1, 2, 3]
    assert neuron_backend.fallback_ops() == ["aten::nonzero (Float)"]
    assert sum("falling back to the CPU" in str(w.message) for w in caught) == 1
    neuron_backend.reset_fallback_ops()
    assert neuron_backend.fallback_ops() == []
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(NeuronUnsupportedOpError):
        torch.nonzero(x)
