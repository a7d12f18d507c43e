"""The device's decisions while Dynamo and AOT Autograd trace: an op the device rejects on device data is a graph break.

Fake ``neuron`` tensors hold meta storage, so FakeTensorMode never reaches the C++ kernel; this check asks the same
decision cache from inside FakeTensorMode's dispatch, before the op's meta kernel runs.
"""

from __future__ import annotations

import weakref

import torch
from torch._subclasses import fake_impls
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from neuron_backend import dispatch, policy
from neuron_backend.config import CONFIG

# fake mode -> (entries of its converter's memo when counted, storages of the fakes it made from real device tensors)
_input_storages: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _device_storages(fake_mode: FakeTensorMode) -> set[int]:
    """The storages of the fakes ``fake_mode`` made from real ``neuron`` tensors (a traced region's inputs and
    parameters, and their views): recounted when the converter's memo grows."""
    memo = fake_mode.fake_tensor_converter.tensor_memo
    n, storages = _input_storages.get(fake_mode, (-1, set()))
    if n != len(memo):
        storages = {f.untyped_storage()._cdata for f in list(memo.values()) if f.fake_device.type == "neuron"}
        _input_storages[fake_mode] = (len(memo), storages)
    return storages


def _fake_dtypes(fake_mode: FakeTensorMode, args, kwargs) -> list[torch.dtype] | None:
    """The dtypes of the op's fake ``neuron`` tensors in dispatch.py's key order (positional tensors and lists, then
    keyword tensors, then a requested dtype); None when none of them is device data.

    Device data is what the wrapper subclass the core replaced saw while tracing: the fakes of real device tensors
    (inputs, parameters) and their views. A tensor a traced region makes itself (``torch.arange(..., device=...)``)
    is checked when the graph reaches the compile backend (compile_backend.check_graph), as it was then."""
    dtypes = []
    on_device = False
    storages = None

    def add(x) -> None:
        nonlocal on_device, storages
        if isinstance(x, FakeTensor) and x.fake_device.type == "neuron":
            dtypes.append(x.dtype)
            if not on_device:
                if storages is None:
                    storages = _device_storages(fake_mode)
                on_device = x.untyped_storage()._cdata in storages

    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            add(a)
        elif type(a) is list or type(a) is tuple:
            for x in a:
                add(x)
    if not on_device:
        return None
    dt = kwargs.get("dtype")
    if dt is not None and type(dt) is torch.dtype:
        dtypes.append(dt)
    return dtypes


def rejection(func, dtypes: list[torch.dtype], args=(), kwargs=None) -> Exception | None:
    """The graph break the device raises for ``func`` on fake inputs of ``dtypes``, or None when it would run it
    (natively, decomposed, or on the CPU fallback): the rule dispatch._run_other applies to real inputs."""
    decision = dispatch.decision_of(func, dtypes)
    if decision == dispatch.CAST or decision == dispatch.COMPLEX:
        inner, computed, _run, _floats = dispatch.plan_of(func, dtypes)
        if inner == policy.UNSUPPORTED or inner == policy.KERNEL_FAIL:
            decision, dtypes = inner, computed
    if decision == policy.KERNEL_FAIL:
        try:
            issue = policy.kernel_failure(func, dtypes, args, kwargs or {})
        except Exception:  # noqa: BLE001 - a precondition on values a fake tensor lacks: decided when the op runs
            return None
        if issue is None or (issue.cpu_retry and CONFIG.cpu_fallback and not CONFIG.fallback_only_for_unimplemented):
            return None
    elif decision != policy.UNSUPPORTED:
        return None
    shapes = [tuple(t.shape) for t in (*args, *(kwargs or {}).values()) if isinstance(t, torch.Tensor)]
    return dispatch.graph_break(func, policy.error_for(func, dtypes, shapes))


def _any_op(func) -> bool:
    return True


def _check(fake_mode: FakeTensorMode, func, *args, **kwargs):
    """FakeTensorMode's per-op hook: raise the device's graph break, else let FakeTensorMode run the op's meta kernel
    (NotImplemented passes the op on to the next implementation)."""
    dtypes = _fake_dtypes(fake_mode, args, kwargs)
    if dtypes is not None:
        err = rejection(func, dtypes, args, kwargs)
        if err is not None:
            raise err
    return NotImplemented


def install() -> None:
    """Put the check first among FakeTensorMode's op implementations (torch/_subclasses/fake_impls.py
    ``op_implementations_checks``, which _dispatch_impl walks before running a meta kernel), once."""
    if not any(impl is _check for _, impl in fake_impls.op_implementations_checks):
        fake_impls.op_implementations_checks.insert(0, (_any_op, _check))
    # FakeTensorMode's dispatch cache is process-wide and keyed on the inputs' metadata only: an entry made under
    # other device settings would skip the check, so it is emptied whenever the device's decisions are.
    dispatch.on_clear(FakeTensorMode.cache_clear)
