"""Exception -> status, blocking op and digest; the dispatch-mode recorder names the op that raised."""

from __future__ import annotations

import torch

from compat.results import Status
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError
from worker.judge.attribution import attribute, error_digest, format_op, op_name, raised_at
from worker.run.reference.optrace import OpRecorder


def test_op_names_are_normalised() -> None:
    assert op_name(torch.ops.aten.mm.default) == "aten::mm"
    assert op_name("aten.histc.default") == "aten::histc"
    assert op_name("aten::_foreach_add.List") == "aten::_foreach_add"
    assert op_name("histc") == "aten::histc"
    assert format_op("aten::histc", [torch.int64]) == "aten::histc (Long)"
    assert format_op("aten::mm", ["torch.bfloat16", torch.float32]) == "aten::mm (BFloat16, Float)"


def test_device_unsupported_op_and_dtype() -> None:
    a = attribute(NeuronUnsupportedOpError("aten::histc", ["Long"], [(4,)]))
    assert a.status == Status.UNSUPPORTED_OP and a.blocking_op == "aten::histc (Long)" and a.op_from_device
    d = attribute(NeuronUnsupportedDtypeError("aten::mm", ["Double"], [(2, 2)]))
    assert d.status == Status.UNSUPPORTED_DTYPE and d.blocking_op == "aten::mm (Double)"


def test_wrapped_device_error_is_found_through_the_cause_chain() -> None:
    try:
        try:
            raise NeuronUnsupportedOpError("aten::cumsum", ["Float"], [(3,)])
        except RuntimeError as inner:
            raise ValueError("while loading the model") from inner
    except ValueError as outer:
        a = attribute(outer)
    assert a.status == Status.UNSUPPORTED_OP and a.blocking_op == "aten::cumsum (Float)"


def test_dispatcher_messages() -> None:
    msg = "Could not run 'aten::_fft_r2c' with arguments from the 'PrivateUse1' backend. This could be..."
    assert attribute(NotImplementedError(msg)).blocking_op == "aten::_fft_r2c"
    mps = "The operator 'aten::isin.Tensor_Tensor_out' is not currently implemented for the MPS device."
    a = attribute(NotImplementedError(mps))
    assert a.status == Status.UNSUPPORTED_OP and a.blocking_op == "aten::isin"


def test_out_of_memory() -> None:
    assert attribute(torch.OutOfMemoryError("neuron out of memory")).status == Status.OOM
    assert attribute(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 10 GB")).status == Status.OOM
    assert attribute(MemoryError()).status == Status.OOM


def test_real_cpu_dtype_failure_named_by_the_recorder() -> None:
    # histc has no integer CPU kernel: a real "not implemented for 'Long'" error.
    rec = OpRecorder(record=False)
    try:
        with rec:
            torch.histc(torch.tensor([1, 2, 3]), bins=3)
    except RuntimeError as exc:
        a = attribute(exc, rec.failing_op)
    assert rec.failing_op == "aten::histc (Long)"
    assert a.status == Status.UNSUPPORTED_DTYPE and a.blocking_op == "aten::histc (Long)"
    assert "histogram" in a.error.message and a.error.traceback


def test_other_errors_are_error_with_class_and_digest() -> None:
    a = attribute(ValueError("shape [2, 16] does not match 17"))
    assert a.status == Status.ERROR and a.error.type == "ValueError" and a.blocking_op is None
    # Same error with other numbers -> same digest; different class -> different digest.
    assert a.digest == error_digest("ValueError", "shape [4, 8] does not match 3")
    assert a.digest != error_digest("TypeError", "shape [2, 16] does not match 17")


def test_recorder_traces_ops_with_dtypes_in_first_use_order() -> None:
    lin = torch.nn.Linear(4, 3)
    rec = OpRecorder()
    with rec:
        lin(torch.randn(2, 4)).relu().sum()
    assert rec.ops[0] == "aten::addmm (Float)" or "aten::t (Float)" in rec.ops
    assert "aten::addmm (Float)" in rec.ops and "aten::relu (Float)" in rec.ops
    assert rec.failing_op is None


def test_compile_failures_are_attributed_to_the_device_op() -> None:
    # Real torch.compile failures: Dynamo raises BackendCompilerFailed ``from None`` (the typed error rides on
    # inner_exception), and with fullgraph=True a neuron graph break surfaces as Unsupported carrying neuron_error.
    import neuron_backend  # noqa: F401  (registers the device and backend="neuron")

    def quantize_of_device_factory(x):
        return x + torch.quantize_per_tensor(torch.arange(4.0, device="neuron"), 0.1, 0, torch.qint8).dequantize()

    # quantized ops are the docs' N class: unsupported with or without CPU fallback, eager or compiled
    cases = [
        (torch.compile(quantize_of_device_factory, backend="neuron"), Status.UNSUPPORTED_OP,
         "aten::quantize_per_tensor (Float)"),
        (torch.compile(lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8).dequantize(), backend="neuron",
                       fullgraph=True), Status.UNSUPPORTED_OP, "aten::quantize_per_tensor (Float)"),
    ]
    for fn, status, op in cases:
        torch._dynamo.reset()
        try:
            fn(torch.ones(4, device="neuron"))
        except Exception as exc:  # noqa: BLE001 - the wrapper type is what is under test
            assert type(exc).__name__ in {"BackendCompilerFailed", "Unsupported"}, type(exc)
            got = attribute(exc)
            assert (got.status, got.blocking_op, got.op_from_device) == (status, op, True)
        else:
            raise AssertionError(f"{op} compiled without error")
    torch._dynamo.reset()


def test_collective_of_names_the_collective_a_rank_failed_in() -> None:
    from worker.judge.attribution import collective_of

    err = RuntimeError("Connection closed by peer")
    err.neuron_collective = "c10d::allreduce_"  # what neuron_backend/collective_ops.py attaches
    wrapped = ValueError("step failed")
    wrapped.__cause__ = err
    assert collective_of(wrapped) == "c10d::allreduce_"
    assert collective_of(RuntimeError("fsdp::all_gather_copy_in failed on rank 1")) == "fsdp::all_gather_copy_in"
    assert collective_of(RuntimeError("shape mismatch in aten::mm")) is None


def test_raised_at_names_the_innermost_frame_of_the_library_asked_for() -> None:
    # Real failures inside torch: without a library the innermost Python frame is named; with "torch/nn/" the
    # innermost frame inside it (the path from site-packages on).
    try:
        torch.nn.functional.linear(torch.ones(2, 3), torch.ones(4, 5))
    except RuntimeError as exc:
        caught = exc
    assert raised_at(caught).endswith("in test_raised_at_names_the_innermost_frame_of_the_library_asked_for")
    assert "test_attribution.py:" in raised_at(caught)  # F.linear is C++: the innermost Python frame is this test
    try:
        torch.nn.Linear(5, 4)(torch.ones(2, 3))
    except RuntimeError as exc:
        caught = exc
    where = raised_at(caught, ("torch/nn/",))
    assert where.startswith("torch/nn/modules/linear.py:") and where.endswith("in forward"), where
    assert raised_at(ValueError("never raised")) is None
