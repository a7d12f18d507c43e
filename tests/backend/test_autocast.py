"""Dtypes as torch-neuronx handles them: float64/int64 inputs computed as float32/int32 (with the int64 overflow
behaviour), complex ops decomposed onto the device, only the fnuz FP8 types rejected.

Sources: autocast.py's docstring (dtype_autocast.py / cast_policy.py of the pre-beta source, INDICATIVE; env-vars page).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import neuron_backend

I32_MIN = -(2**31)


def test_float64_lives_on_the_device_and_computes_in_float32(dev):
    x = torch.tensor([1 / 3, 1e-10, 2.0**40 + 1], dtype=torch.float64)
    d = x.to(dev)
    assert d.dtype == torch.float64 and torch.equal(d.cpu(), x)  # storage keeps 64 bits (transfers bounce via CPU)
    got = (d * 1).cpu()
    assert got.dtype == torch.float64  # restored, as DtypeAutocastContext.restore_dtypes does
    # computed in float32: exactly the float32 rounding of each value (2**40 + 1 needs 41 bits: rounds to 2**40)
    assert torch.equal(got, x.to(torch.float32).to(torch.float64))
    assert got[2].item() == 2.0**40
    assert neuron_backend.fallback_ops() == []


def test_float64_zero_dim_scalars_are_not_cast(dev):
    # dtype_autocast.py casts only inputs with ndim != 0: a 0-d float64 keeps full precision.
    s = torch.tensor(1 / 3, dtype=torch.float64)
    assert (s.to(dev) * 3).cpu().item() == (s * 3).item()


def test_int64_storage_is_exact_but_computation_wraps_to_int32(dev):
    # The documented overflow behaviour (autocast.py): values above 2**31 survive a round trip, any op on them sees
    # the two's-complement int32 value, and results wrap like int32 arithmetic.
    big = torch.tensor([2**40 + 3, 2**31 + 5, 7])
    d = big.to(dev)
    assert d.dtype == torch.int64 and d.cpu().tolist() == big.tolist()
    assert (d + 0).cpu().tolist() == [3, I32_MIN + 5, 7]
    assert (d > 0).cpu().tolist() == [True, False, True]  # 2**31 + 5 compares as a negative int32
    top = torch.tensor([2**31 - 1], device=dev)
    assert (top + 1).cpu().tolist() == [I32_MIN] and (top + 1).dtype == torch.int64
    assert (top * 2).cpu().tolist() == [-2]
    # indices below 2**31 are unaffected: gather/embedding with int64 ids match the CPU exactly
    table = torch.arange(12.0).reshape(6, 2)
    ids = torch.tensor([[5, 0, 3]])
    assert torch.equal(torch.nn.functional.embedding(ids.to(dev), table.to(dev)).cpu(),
                       torch.nn.functional.embedding(ids, table))


def test_int64_in_place_results_wrap_too(dev):
    t = torch.tensor([2**31 - 1, 1], device=dev)
    t.add_(1)
    assert t.cpu().tolist() == [I32_MIN, 2]


def test_int64_sum_overflows_like_int32(dev):
    x = torch.full((4,), 2**30, device=dev)
    assert x.sum().item() == 0  # 4 * 2**30 = 2**32 wraps to 0 in int32; the CPU gives 2**32
    assert torch.full((4,), 2**30).sum().item() == 2**32


@pytest.mark.parametrize("decompose", [True, False])
def test_complex_ops_are_decomposed_on_the_device_by_default(dev, decompose, exact_numerics):
    neuron_backend.set_complex_decompose(decompose)
    torch.manual_seed(0)
    a, b = torch.randn(5, dtype=torch.complex64), torch.randn(5, dtype=torch.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = (a.to(dev) * b.to(dev)).exp().cpu()
    # The same host kernels run on both sides: equal to float32 rounding (1e-6).
    torch.testing.assert_close(got, (a * b).exp(), rtol=1e-6, atol=1e-6)
    fell_back = [e for e in neuron_backend.fallback_ops() if "Complex" in e]
    assert (fell_back == []) if decompose else fell_back, fell_back
    neuron_backend.set_strict(True)
    if decompose:  # decomposed complex runs natively: strict mode still runs it
        (a.to(dev) * b.to(dev)).cpu()
    else:
        with pytest.raises(neuron_backend.NeuronUnsupportedOpError):
            a.to(dev) * b.to(dev)


def test_complex128_is_computed_as_complex64(dev):
    a = torch.tensor([1 / 3 + 1j / 7], dtype=torch.complex128)
    got = (a.to(dev) * 1).cpu()
    assert got.dtype == torch.complex128
    assert torch.equal(got, a.to(torch.complex64).to(torch.complex128))


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fnuz, torch.float8_e5m2fnuz])
def test_the_rejected_fp8_types_stay_rejected_even_with_fallback(dev, dtype):
    # neuronx-cc rejects the *fnuz FP8 variants: no fallback makes them work (the profile's rejected_dtypes). The
    # OCP fp8 types run in eager on real Trn2 (whn09/xpu-perf), and the other wide and complex dtypes are held.
    assert neuron_backend.device_info()["cpu_fallback"] is True
    with pytest.raises(neuron_backend.NeuronUnsupportedDtypeError):
        torch.zeros(2).to(dtype).to(dev)
    for ok in (torch.float64, torch.complex64, torch.int64, torch.float8_e4m3fn, torch.float8_e5m2):
        assert torch.zeros(2).to(ok).to(dev).dtype == ok


def test_wide_int64_values_are_wrapped_through_views_and_copies(dev):
    # The input wrap is skipped for storages that cannot hold values outside int32; a host copy of such values marks
    # its storage, so views of it and value-preserving ops (clone, cat) still see the wrapped value.
    d = torch.tensor([2**33 + 9, 4]).to(dev)
    assert (d[:1] + 0).cpu().tolist() == [9]
    assert d.clone().cpu().tolist() == [9, 4]
    assert torch.cat([d, d]).cpu().tolist() == [9, 4, 9, 4]
    small = torch.arange(3, device=dev)
    assert (small * 2).cpu().tolist() == [0, 2, 4]


def test_a_float_to_int64_conversion_can_enter_wide_values(dev):
    f = torch.tensor([2.0**35], device=dev)
    i = f.long()
    assert i.cpu().tolist() == [2**35]  # the conversion result is stored exactly
    assert (i + 1).cpu().tolist() == [1]  # and read as its int32 wrap (2**35 wraps to 0)
