"""PyTorch's operator database (op_db) driven through the device: every (op, dtype) either matches the CPU or raises
the typed error; float64 always raises the dtype error. A bounded number of samples per op keeps this fast.
"""

from __future__ import annotations

from itertools import islice

import pytest
import torch
from torch.testing._internal import common_utils
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo import core as opinfo_core
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


@pytest.fixture(autouse=True, scope="module")
def _no_stack_crawl_per_sample_call():
    """Every ``op.sample_inputs`` call runs torch's ``extract_test_fn`` twice: ``inspect.stack()`` (the source
    lines of every frame) in search of a ``unittest.TestCase`` caller, to attach per-test sample skips and tracked
    inputs. A pytest function is never one, so the answer is always None here, but under pytest's deep stack the
    crawl took ~0.9 s per call: ~90% of this file's time (cProfile, 2026-12-03). Answer None directly."""
    with pytest.MonkeyPatch.context() as mp:
        for module in (common_utils, opinfo_core):
            mp.setattr(module, "extract_test_fn", lambda: None)
        yield


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


def _drive(dtype: torch.dtype, names: set[str] | None = None, samples_per_op: int = SAMPLES_PER_OP,
           rtol: float = 1e-5, atol: float = 1e-5, reference=None):
    outcome = {"match": [], "unsupported": [], "mismatch": [], "crash": []}
    for op in _ops(dtype):
        if names is not None and op.name not in names:
            continue
        try:
            # Only the first samples, generated lazily: torch reseeds its generators for every sample it yields
            # (cheap alone, ~4 ms each under pytest's stack), and list(...)[:n] made all of them to keep n.
            samples = list(islice(op.sample_inputs("cpu", dtype, requires_grad=False), samples_per_op))
        except Exception:  # noqa: BLE001 - sample generation itself unsupported on this build
            continue
        for sample in samples:
            try:
                expected = _run(op, sample, "cpu") if reference is None else reference(op, sample)
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
                torch.testing.assert_close(tree_map(_cpu, got), expected, rtol=rtol, atol=atol, equal_nan=True,
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
        samples = list(islice(op.sample_inputs("cpu", torch.float64, requires_grad=False), 1))
        for sample in samples:
            with pytest.raises(NeuronUnsupportedDtypeError) as info:
                _run(op, sample, "neuron")
            assert "Double" in info.value.dtypes
            checked += 1
    assert checked >= 40


def test_int64_and_bool_ops_match_cpu_exactly_or_raise():
    # Integer/bool results must be bit-identical: op_db's integer samples are small, far from the int32 wrap.
    for dtype in (torch.int64, torch.bool):
        out = _drive(dtype, samples_per_op=1, rtol=0, atol=0)
        assert not out["crash"], out["crash"][:20]
        assert not out["mismatch"], out["mismatch"][:20]
        assert len(out["match"]) > len(out["unsupported"]), {k: len(v) for k, v in out.items()}
    unsupported = {op for _, _, op in _drive(torch.int64, names={"mm", "bmm", "histc"}, samples_per_op=1)["unsupported"]}
    assert {"aten::mm", "aten::bmm"} <= unsupported  # no integer matmul on the TensorEngine


MATMUL_FAMILY = {"mm", "bmm", "addmm", "baddbmm", "matmul", "nn.functional.linear", "addbmm", "mv", "addmv",
                 "nn.functional.conv1d", "nn.functional.conv2d", "dot", "vdot"}
# In these the first argument is the added term (bias), not a matmul operand: the policy leaves it unrounded.
ADD_FORMS = {"addmm", "baddbmm", "addbmm", "addmv"}


def _bf16_reference(op, sample):
    """What the bf16 policy promises: the CPU op with its matmul operands rounded to bf16, accumulated in fp32.

    Matmul operands: the input and the first positional argument (weight / second factor); for the add-forms the
    two factors after the added term. Biases (later arguments, kwargs) stay fp32.
    """
    def rnd(x):
        return x.to(torch.bfloat16).to(torch.float32) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
    torch.manual_seed(0)
    add_form = op.name in ADD_FORMS
    inp = sample.input if add_form else rnd(sample.input)
    n = 2 if add_form else 1
    args = [rnd(a) if i < n else a for i, a in enumerate(sample.args)]
    return op(inp, *args, **sample.kwargs)


def test_matmul_family_follows_bf16_policy():
    # The device must equal the CPU on bf16-rounded matmul operands up to fp32 accumulation order (matmul/inner
    # reach mm/bmm through reshapes): 1e-4 relative, 1e-4 absolute on O(1..10) values.
    out = _drive(torch.float32, names=MATMUL_FAMILY, samples_per_op=2, rtol=1e-4, atol=1e-4, reference=_bf16_reference)
    assert not out["crash"] and not out["mismatch"], (out["crash"] + out["mismatch"])[:10]
    assert {"mm", "bmm", "addmm", "matmul", "nn.functional.linear"} <= set(out["match"])


def test_published_ops_profile_runs_less_but_never_crashes(float32_outcome):
    neuron_backend.set_profile("published-ops")  # restored by conftest
    neuron_backend.set_numerics(False)
    out = _drive(torch.float32, samples_per_op=1)
    assert not out["crash"] and not out["mismatch"], (out["crash"] + out["mismatch"])[:10]
    # narrower table: fewer ops run and more are rejected (each rejection asserted to name an op in _drive)
    assert len(out["match"]) < len(float32_outcome["match"])
    assert len(out["unsupported"]) > len(float32_outcome["unsupported"])
