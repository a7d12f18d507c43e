"""PyTorch's operator database (op_db) driven through the device: every (op, dtype) either matches the CPU or raises
the typed error; float64 always raises the dtype error. A bounded number of samples per op keeps this fast.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_map

import neuron_backend
from neuron_backend import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError

SAMPLES_PER_OP = 2
# Families whose sample generation alone costs seconds or which need LAPACK/FFT/sparse; none are in the op table.
SKIP_PREFIXES = ("linalg.", "fft.", "sparse.", "_refs", "special.", "nn.functional.conv_transpose", "cdist", "pdist",
                 "svd", "pca_lowrank", "lu", "cholesky", "qr", "triangular_solve", "geqrf", "ormqr", "eig", "symeig",
                 "to_sparse", "nn.functional.ctc_loss", "stft", "istft", "nn.functional.interpolate",
                 "nn.functional.grid_sample", "nn.functional.unfold", "nn.functional.fractional_max_pool",
                 "nn.functional.max_unpool", "nn.functional.multi_head_attention_forward", "histogramdd",
                 "nn.functional.embedding_bag", "masked.", "signal.", "jiterator", "view_as_complex", "resize",
                 # takes its split points as a host tensor (CUDA too): moving every sample tensor breaks the sample
                 "tensor_split")
# Their values are unspecified (uninitialised memory): only shape and dtype can be compared.
UNINITIALISED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}


def _ops(dtype: torch.dtype):
    for op in op_db:
        if op.name.startswith(SKIP_PREFIXES) or op.name.endswith("_") or op.variant_test_name:
            continue
        if dtype in op.supported_dtypes("cpu"):
            yield op


def _to(device):
    def move(x):
        return x.detach().to(device) if isinstance(x, torch.Tensor) else x
    return move


def _cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _run(op, sample, device):
    move = _to(device)
    torch.manual_seed(0)  # random ops draw from the host generator on both devices
    kwargs = tree_map(move, sample.kwargs)
    if "device" in kwargs:  # factory samples name their device
        kwargs["device"] = device
    return op(move(sample.input), *tree_map(move, sample.args), **kwargs)


def _drive(dtype: torch.dtype):
    outcome = {"match": [], "unsupported": [], "mismatch": [], "crash": []}
    for op in _ops(dtype):
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:SAMPLES_PER_OP]
        except Exception:  # noqa: BLE001 - sample generation itself unsupported on this build
            continue
        for sample in samples:
            try:
                expected = _run(op, sample, "cpu")
            except Exception:  # noqa: BLE001 - the CPU reference rejects this sample: nothing to compare
                continue
            try:
                got = _run(op, sample, "neuron")
            except NeuronUnsupportedOpError as e:
                assert e.op.startswith(("aten::", "prims::")) and e.op in str(e)
                outcome["unsupported"].append((op.name, type(e).__name__, e.op))
                break
            except Exception as e:  # noqa: BLE001 - recorded and asserted on below
                outcome["crash"].append((op.name, f"{type(e).__name__}: {str(e)[:160]}"))
                break
            if op.name in UNINITIALISED:
                assert got.shape == expected.shape and got.dtype == expected.dtype and got.device.type == "neuron"
                continue
            try:
                # exact numerics (fixture): the device runs the CPU kernels, so only decompositions may reorder
                # float arithmetic; 1e-5 relative / 1e-5 absolute covers that reordering in float32.
                torch.testing.assert_close(tree_map(_cpu, got), expected, rtol=1e-5, atol=1e-5, equal_nan=True,
                                           check_device=False, check_dtype=True)
            except Exception as e:  # noqa: BLE001
                outcome["mismatch"].append((op.name, str(e)[:160]))
                break
        else:
            outcome["match"].append(op.name)
    return outcome


@pytest.fixture(scope="module")
def float32_outcome():
    neuron_backend.set_numerics(False)
    try:
        return _drive(torch.float32)
    finally:
        neuron_backend.set_numerics(True)


def test_float32_ops_match_cpu_or_raise_the_typed_error(float32_outcome):
    out = float32_outcome
    total = sum(len(v) for v in out.values())
    print({k: len(v) for k, v in out.items()})
    assert not out["crash"], out["crash"][:20]
    assert not out["mismatch"], out["mismatch"][:20]
    # The default profile is meant to run common models: most float32 ops of op_db must run.
    assert len(out["match"]) >= 0.6 * total, {k: len(v) for k, v in out.items()}


def test_known_unsupported_float32_ops_raise(float32_outcome):
    unsupported = {name for name, _, _ in float32_outcome["unsupported"]}
    for name in ("nonzero", "masked_select", "unique"):
        assert name in unsupported, f"{name} should be rejected (data-dependent output shape)"
    assert "add" in float32_outcome["match"] and "mm" in float32_outcome["match"]


def test_float64_always_raises_dtype_error():
    checked = 0
    for op in list(_ops(torch.float64))[:60]:
        samples = list(op.sample_inputs("cpu", torch.float64, requires_grad=False))[:1]
        for sample in samples:
            with pytest.raises(NeuronUnsupportedDtypeError) as info:
                _run(op, sample, "neuron")
            assert "Double" in info.value.dtypes
            checked += 1
    assert checked >= 40
