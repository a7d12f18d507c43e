"""PyTorch's operator database (op_db) driven through the device against the profile: every (op, dtype) that runs
in strict mode (native) matches the CPU; every op that strict mode rejects runs with fallback allowed, is recorded and
matches; what still raises is unsupported by the profile, with the typed error naming op, dtypes and shapes.

The default suite drives a fixed sample of op_db; the whole database is @pytest.mark.slow.
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
from neuron_backend import NeuronUnsupportedOpError, policy
from neuron_backend.hardware import profiles
from neuron_backend.stats import dtype_name

# Families whose sample generation alone costs seconds or which need sparse/complex inputs the drive does not build.
SKIP_PREFIXES = ("fft.", "sparse.", "_refs", "nn.functional.conv_transpose", "pca_lowrank", "to_sparse",
                 "nn.functional.ctc_loss", "stft", "istft", "nn.functional.interpolate", "nn.functional.grid_sample",
                 "nn.functional.unfold", "nn.functional.fractional_max_pool", "nn.functional.max_unpool",
                 "nn.functional.multi_head_attention_forward", "histogramdd", "nn.functional.embedding_bag",
                 "masked.", "signal.", "jiterator", "view_as_complex", "resize", "svd_lowrank", "lu_unpack",
                 # takes its split points as a host tensor (CUDA too): moving every sample tensor breaks the sample
                 "tensor_split")
# Their values are unspecified (uninitialised memory): only shape and dtype can be compared.
UNINITIALISED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
# Ops the sampled drive always covers: the classes that decide coverage (native, data-dependent native, explicit
# CPU fallback registrations, boxed fallback, dtype-limited native).
ALWAYS = {"add", "mul", "mm", "bmm", "nonzero", "masked_select", "repeat_interleave", "index_select", "where",
          "histc", "cumsum", "sort", "erfc", "atan2", "linalg.qr", "linalg.inv", "cummax", "unique", "softmax",
          "nn.functional.silu", "nn.functional.gelu", "sum", "mean", "topk", "gather", "scatter_add"}
SAMPLE_EVERY = 9  # plus every 9th op of op_db: a cheap, fixed cross-section


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


def _ops(dtype: torch.dtype, names=None, every: int = 1):
    i = 0
    for op in op_db:
        if op.name.startswith(SKIP_PREFIXES) or op.name.endswith("_") or op.variant_test_name:
            continue
        if dtype not in op.supported_dtypes("cpu"):
            continue
        i += 1
        if names is None or op.name in names or (every > 1 and i % every == 0):
            yield op


def _move(device):
    def move(x):
        return x.detach().to(device) if isinstance(x, torch.Tensor) else x
    return move


def _cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _run(op, sample, device):
    move = _move(device)
    torch.manual_seed(0)  # random ops draw from the host generator on both devices
    kwargs = tree_map(move, sample.kwargs)
    if "device" in kwargs:  # factory samples name their device
        kwargs["device"] = device
    return op(move(sample.input), *tree_map(move, sample.args), **kwargs)


def _matches(op, got, expected, rtol, atol) -> str | None:
    if op.name in UNINITIALISED:
        ok = got.shape == expected.shape and got.dtype == expected.dtype and got.device.type == "neuron"
        return None if ok else "shape/dtype"
    try:
        torch.testing.assert_close(tree_map(_cpu, got), expected, rtol=rtol, atol=atol, equal_nan=True,
                                   check_device=False, check_dtype=True)
    except AssertionError as e:
        return str(e)[:160]
    return None


def _typed(e: NeuronUnsupportedOpError) -> None:
    """The typed error names the op, its dtypes and its shapes, in the message too."""
    assert e.op.startswith(("aten::", "prims::")) and e.op in str(e), e
    assert isinstance(e.dtypes, tuple) and isinstance(e.shapes, tuple), e


def _recorded(e: NeuronUnsupportedOpError) -> bool:
    names = [r.split(" ")[0] for r in neuron_backend.fallback_ops()]
    return bool(names) and any(n == e.op or n in e.reason for n in names)


def drive(dtype: torch.dtype, names=None, every: int = 1, samples_per_op: int = 1, rtol=1e-5, atol=1e-5) -> dict:
    """Per op: 'native' (strict run matched), 'fallback' (strict raised; fallback ran, recorded, matched),
    'unsupported' (raised with fallback allowed), or a failure: 'mismatch', 'unrecorded', 'crash'."""
    out = {k: [] for k in ("native", "fallback", "unsupported", "mismatch", "unrecorded", "crash")}
    prof = policy.active()
    for op in _ops(dtype, names, every):
        try:
            # Only the first samples, generated lazily: torch reseeds its generators for every sample it yields
            # (cheap alone, ~4 ms each under pytest's stack), and list(...)[:n] made all of them to keep n.
            samples = list(islice(op.sample_inputs("cpu", dtype, requires_grad=False), samples_per_op))
        except Exception:  # noqa: BLE001 - sample generation itself unsupported on this build
            continue
        verdict = None
        for sample in samples:
            try:
                expected = _run(op, sample, "cpu")
            except Exception:  # noqa: BLE001 - the CPU reference rejects this sample: nothing to compare
                continue
            neuron_backend.set_cpu_fallback(False)
            neuron_backend.reset_fallback_ops()
            try:
                got = _run(op, sample, "neuron")
            except NeuronUnsupportedOpError as strict_err:
                _typed(strict_err)
                neuron_backend.set_cpu_fallback(True)
                neuron_backend.reset_fallback_ops()
                try:
                    got = _run(op, sample, "neuron")
                except NeuronUnsupportedOpError as e:
                    _typed(e)
                    cls = prof.classification(e.op.replace("prims::", "aten::"))
                    # a rejected dtype among the inputs, or produced inside (complex(re, im) on legacy-xla)
                    rejected = any(d in {dtype_name(t) for t in prof.rejected_dtypes} for d in e.dtypes) or any(
                        r in e.reason for r in prof.rejected_dtypes.values())
                    # a known kernel failure the real device raises without a CPU retry (integer topk: NCC_EVRF013)
                    known = e.op in prof.kernel_failures and not prof.kernel_failures[e.op].cpu_retry
                    verdict = ("unsupported", (op.name, e.op)) if cls == "unsupported" or rejected or known else (
                        "crash", (op.name, f"raised with fallback allowed: {str(e)[:160]}"))
                    break
                except Exception as e:  # noqa: BLE001 - recorded and asserted on below
                    verdict = ("crash", (op.name, f"fallback run: {type(e).__name__}: {str(e)[:160]}"))
                    break
                bad = _matches(op, got, expected, rtol, atol)
                if bad:
                    verdict = ("mismatch", (op.name, "fallback", bad))
                    break
                if not _recorded(strict_err):
                    verdict = ("unrecorded", (op.name, strict_err.op, neuron_backend.fallback_ops()))
                    break
                verdict = ("fallback", (op.name, strict_err.op))
                continue
            except Exception as e:  # noqa: BLE001 - recorded and asserted on below
                verdict = ("crash", (op.name, f"strict run: {type(e).__name__}: {str(e)[:160]}"))
                break
            bad = _matches(op, got, expected, rtol, atol)
            if bad:
                verdict = ("mismatch", (op.name, "native", bad))
                break
            if verdict is None:
                verdict = ("native", op.name)
        if verdict is not None:
            out[verdict[0]].append(verdict[1])
    neuron_backend.set_cpu_fallback(True)
    return out


def _assert_clean(out: dict) -> None:
    print({k: len(v) for k, v in out.items()})
    for bad in ("crash", "mismatch", "unrecorded"):
        assert not out[bad], (bad, out[bad][:15])


@pytest.fixture
def exact():
    """fp32 matmul numerics: device results must then equal the CPU's (the same host kernels run)."""
    neuron_backend.set_numerics(False)


def test_sampled_float32_drive_on_trn2(exact):
    # Decompositions may reorder float32 arithmetic: 1e-5 relative / 1e-5 absolute covers that reordering.
    out = drive(torch.float32, names=ALWAYS, every=SAMPLE_EVERY)
    _assert_clean(out)
    native = set(out["native"])
    fallback = {name for name, _ in out["fallback"]}
    assert {"add", "mm", "nonzero", "masked_select", "histc", "softmax"} <= native, native
    assert {"erfc", "atan2", "linalg.qr", "linalg.inv"} <= fallback, fallback
    assert len(native) + len(fallback) >= 40


def test_sampled_integer_drive_on_trn2(exact):
    # Integer and bool results must be bit-identical: op_db's integer samples are small, far from the int32 range.
    for dtype in (torch.int32, torch.bool):
        out = drive(dtype, names=ALWAYS, every=SAMPLE_EVERY * 2, rtol=0, atol=0)
        _assert_clean(out)
        assert out["native"] and out["fallback"], {k: len(v) for k, v in out.items()}
    out = drive(torch.int32, names={"mm", "bmm", "histc"}, rtol=0, atol=0)
    assert {"mm", "bmm"} <= {name for name, _ in out["fallback"]}  # integer matmul falls back (low confidence)


def test_every_unsupported_entry_raises_the_typed_error_even_with_fallback_allowed():
    neuron_backend.set_cpu_fallback(True)
    prof = profiles.load("trn2")
    unsupported = [op for op, e in prof.entries.items() if e.cls == "unsupported"]
    assert len(unsupported) >= 10 and "aten::quantize_per_tensor" in unsupported
    for name in unsupported:
        packet = getattr(torch.ops.aten, name[len("aten::"):])
        func = getattr(packet, packet.overloads()[0])
        assert policy.decide(func, [torch.float32]) == policy.UNSUPPORTED, name
        e = policy.error_for(func, [torch.float32], [(2, 3)])
        assert (e.op, e.dtypes, e.shapes) == (name, ("Float",), ((2, 3),)) and "[2, 3]" in str(e), name
    for dt in prof.rejected_dtypes:
        e = policy.error_for(torch.ops.aten.add.Tensor, [dt], [(2,)])
        assert policy.decide(torch.ops.aten.add.Tensor, [dt]) == policy.UNSUPPORTED
        assert e.op == "aten::add" and e.reason.startswith(prof.rejected_dtypes[dt][:40])
        assert ("EVRF005" if "fnuz" in str(dt) else "Beta 3") in e.reason


MATMUL_FAMILY = {"mm", "bmm", "addmm", "baddbmm", "matmul", "nn.functional.linear", "addbmm", "mv", "addmv",
                 "nn.functional.conv1d", "nn.functional.conv2d", "dot", "vdot"}
# In these the first argument is the added term (bias), not a matmul operand: the policy leaves it unrounded.
ADD_FORMS = {"addmm", "baddbmm", "addbmm", "addmv"}


def _bf16_reference(op, sample):
    """What the bf16 policy promises: the CPU op with its matmul operands rounded to bf16, accumulated in fp32."""
    def rnd(x):
        return x.to(torch.bfloat16).to(torch.float32) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
    torch.manual_seed(0)
    add_form = op.name in ADD_FORMS
    inp = sample.input if add_form else rnd(sample.input)
    n = 2 if add_form else 1
    args = [rnd(a) if i < n else a for i, a in enumerate(sample.args)]
    return op(inp, *args, **sample.kwargs)


def test_matmul_family_follows_the_bf16_policy():
    # The device must equal the CPU on bf16-rounded matmul operands up to fp32 accumulation order (matmul/inner
    # reach mm/bmm through reshapes): 1e-4 relative, 1e-4 absolute on O(1..10) values.
    neuron_backend.set_cpu_fallback(False)
    names = {"mm", "bmm", "addmm", "matmul", "nn.functional.linear"}
    for op in _ops(torch.float32, names):
        for sample in list(op.sample_inputs("cpu", torch.float32, requires_grad=False))[:2]:
            got = _run(op, sample, "neuron")
            torch.testing.assert_close(got.cpu(), _bf16_reference(op, sample), rtol=1e-4, atol=1e-4)
            names.discard(op.name)
    assert not names, names


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["trn2", "legacy-xla"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_full_op_db_drive(profile, dtype, exact):
    neuron_backend.set_profile(profile)
    # bf16 results differ from the CPU only where a decomposition reorders bf16 arithmetic: 1.6e-2 is bf16's
    # resolution (8 bits of mantissa); integers and bool are exact.
    tol = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}.get(dtype, 0)
    _assert_clean(drive(dtype, rtol=tol, atol=tol))
