"""The device's slow path: what the C++ boxed kernel (csrc/decisions.cpp) hands to Python, and the decisions it caches.

Decisions come from policy.py (op table, decompositions, fallback); device-transfer ops are handled here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from neuron_backend import autocast, fallback, memory, numerics, policy, stats, transfers
from neuron_backend.aliases import wrap_out as _wrap_out
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedOpError
from neuron_backend.hardware.matmul_autocast import MATMUL_OPERANDS
from neuron_backend.tensor import _C, wrap
from neuron_backend.tensor import to_host as host

aten = torch.ops.aten
_CPU = torch.device("cpu")
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_Tensor = torch.Tensor

# Dispatch-level decisions ahead of the op table (autocast.py): 64-bit inputs computed as 32-bit; complex decomposed.
CAST, COMPLEX = 100, 101
# id(op) -> whether it returns a view of an input (never autocast: the result must alias its base)
_views: dict[int, bool] = {}

# (op, input dtypes) -> decision. The decision depends only on these (and the profile/settings, which clear it),
# so each op pays the table lookup, decomposition probe and dtype rules once per process.
_decisions: dict[tuple, int] = {}
# Ops that may legitimately see a host tensor with data (device transfer, and indices a device copies over).
_MIXED_OK = {id(op) for op in (aten.copy_.default, aten._to_copy.default, aten.index.Tensor, aten.index_put_.default,
                               aten.index_put.default, aten._index_put_impl_.default, aten.lift_fresh.default)}


def _shapes(args, kwargs) -> list[tuple[int, ...]]:
    return [tuple(t.shape) for t in fallback.tensors_in(args, kwargs)]


def _mixed_device(func, a) -> RuntimeError:
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, neuron and cpu! "
        f"(when checking argument for {func._schema.name})"
    )


def _cross_core(func, a: int, b: int) -> RuntimeError:
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, neuron:{a} and neuron:{b}! "
        f"(when checking argument for {func._schema.name})"
    )


# Observers of every op reaching the device (attention.recording); while any is set, the C++ fast path is off.
_observers: list = []


@contextlib.contextmanager
def observing(fn) -> Iterator[None]:
    """Call ``fn(func, args, kwargs)`` for every op that reaches the device while the block runs."""
    _observers.append(fn)
    _C.set_fast(False)
    try:
        yield
    finally:
        _observers.remove(fn)
        _C.set_fast(not _observers)


def dispatch(func, args, kwargs):
    """Run ``func`` on device tensors (the C++ kernel's slow path): the cached decision, then the Python run."""
    if _observers:
        for fn in _observers:
            fn(func, args, kwargs)
    fid = id(func)
    special = _SPECIAL.get(fid)
    if special is not None:
        return special(func, args, kwargs)
    core = -1
    dtypes = []
    new_args = []
    for a in args:
        if isinstance(a, _Tensor):
            if a.device.type == "neuron":
                c = a.device.index
                if core != c:
                    if core >= 0:
                        raise _cross_core(func, core, c)
                    core = c
                dtypes.append(a.dtype)
                new_args.append(host(a))
                continue
            if a.dim() > 0 and fid not in _MIXED_OK:
                raise _mixed_device(func, a)
            new_args.append(a)
        elif (type(a) is list or type(a) is tuple) and a and (
                isinstance(a[0], _Tensor) or (len(a) > 1 and isinstance(a[-1], _Tensor))):
            inner = []
            for x in a:
                if isinstance(x, _Tensor) and x.device.type == "neuron":
                    c = x.device.index
                    if core != c:
                        if core >= 0:
                            raise _cross_core(func, core, c)
                        core = c
                    dtypes.append(x.dtype)
                    inner.append(host(x))
                else:
                    inner.append(x)
            new_args.append(inner)
        else:
            new_args.append(a)
    if kwargs:
        new_kwargs = {}
        for k, v in kwargs.items():
            if isinstance(v, _Tensor) and v.device.type == "neuron":
                if core < 0:
                    core = v.device.index
                dtypes.append(v.dtype)
                v = host(v)
            elif k == "device" and v is not None and torch.device(v).type == "neuron":
                v = _CPU
            elif (type(v) is list or type(v) is tuple) and v and isinstance(v[0], _Tensor) \
                    and v[0].device.type == "neuron":
                # a tensor-list out= (split_with_sizes_copy.out, which FSDP2 calls): write into the host aliases
                dtypes.extend(x.dtype for x in v)
                v = type(v)(host(x) if x.device.type == "neuron" else x for x in v)
            new_kwargs[k] = v
        dt = kwargs.get("dtype")
        if dt is not None and type(dt) is torch.dtype:
            dtypes.append(dt)  # the requested result dtype is part of the decision (sum(dtype=float64))
    else:
        new_kwargs = kwargs
    if core < 0:
        if not dtypes and not torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CPU"):
            # No device tensor among the arguments (zeros_like(host, device="neuron")): the op's composite kernel,
            # which is also the CPU's entry, runs as it would without the C++ core's registration.
            return func.redispatch(_CPU_KEYS, *args, **kwargs)
        core = 0
    key = (fid, *dtypes)
    decision = _decisions.get(key)
    if decision is None:
        decision = _decide(func, dtypes, args, kwargs)
        _decisions[key] = decision
    if decision == 0:  # policy.NATIVE
        out = func._op(*new_args, **new_kwargs)
    elif decision == policy.MATMUL:
        out = numerics.matmul(func, new_args, new_kwargs)
    else:
        return _run_other(func, decision, dtypes, args, kwargs, new_args, new_kwargs, core)
    return _wrap_out(func, out, args, kwargs, core, new_args, new_kwargs)


_SLOW = (2, ())
_NATIVE = (0, ())


def fast_decision(func, dtypes: list) -> tuple[int, tuple[int, ...]]:
    """The C++ kernel's question for a new (op, dtypes): (0, ()) native, (1, operand positions) bf16-rounded
    matmul, (2, ()) the Python slow path (dispatch above)."""
    if id(func) in _SPECIAL:
        if func is aten._to_copy.default:
            return transfers.fast_to_copy(dtypes) or _SLOW
        if func is aten._local_scalar_dense.default:
            return 5, ()  # counted in C++ (stats.add_host_sync_source)
        return _SLOW
    decision = decision_of(func, dtypes)
    if decision == policy.NATIVE:
        return _NATIVE
    if decision == policy.MATMUL:
        return 1, MATMUL_OPERANDS.get(func._schema.name, (0, 1))
    if decision == CAST:
        # int64 inputs computed as int32 (autocast.py), run natively: the C++ kernel runs the op on the 64-bit data
        # and wraps what _run_cast wraps, while no storage holds int64 values outside int32 (autocast.any_wide).
        inner, _computed, run, floats = plan_of(func, dtypes)
        if inner == policy.NATIVE and not floats and torch.float64 not in dtypes:
            return 3, (run, int(run == 0 and autocast.output_wraps(func)))
    return _SLOW


def _resolve(name: str, overload: str):
    ns, _, op = name.partition("::")
    return getattr(getattr(getattr(torch.ops, ns), op), overload or "default")


def decision_of(func, dtypes: list) -> int:
    """The device's cached decision for ``func`` on inputs of ``dtypes`` (decided now if it is new)."""
    key = (id(func), *dtypes)
    decision = _decisions.get(key)
    if decision is None:
        decision = _decisions[key] = _decide(func, dtypes, (), {})
    return decision


def decided(func, dtypes) -> int | None:
    """The decision already taken for ``func`` on inputs of ``dtypes``, or None if it never reached the device."""
    return _decisions.get((id(func), *dtypes))


def _decide(func, dtypes, args, kwargs) -> int:
    kind = autocast.kind(dtypes)
    if kind is not None:
        if _is_view(func):  # a view is never cast: decided on the computed dtypes, run as any native view
            inner = _decide(func, autocast.mapped(dtypes), args, kwargs)
            if inner == policy.NATIVE:
                return inner
        return COMPLEX if kind == "complex" else CAST
    decision = policy.decide(func, dtypes, args, kwargs)
    if decision != policy.FALLBACK and decision != policy.UNSUPPORTED and decision != policy.KERNEL_FAIL:
        stats.record_executed(func)
    return decision


def _is_view(func) -> bool:
    found = _views.get(id(func))
    if found is None:
        found = _views[id(func)] = any(
            r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)
    return found


# (op, input dtypes) of a CAST/COMPLEX decision -> (inner decision on the computed dtypes, computed dtypes, kind of
# run: 0 functional, 1 view/materialize, 2 writes an input; whether float64/complex128 inputs need a cast)
_plans: dict[tuple, tuple] = {}


def _plan(func, dtypes, args, kwargs) -> tuple:
    computed = autocast.mapped(dtypes)
    inner = _decide(func, computed, args, kwargs)
    run = 1 if (_is_view(func) or inner == policy.MATERIALIZE) else (2 if func._schema.is_mutable else 0)
    floats = any(d is torch.float64 or d is torch.complex128 for d in dtypes)
    return inner, computed, run, floats


def plan_of(func, dtypes, args=(), kwargs=None) -> tuple:
    """The cached plan of a CAST/COMPLEX decision: (inner decision, computed dtypes, kind of run, wide floats)."""
    key = (id(func), *dtypes)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _plan(func, dtypes, args, kwargs or {})
    return plan


def _run_cast(func, dtypes, args, kwargs, new_args, new_kwargs, core, is_complex: bool):
    """An op with 64-bit or complex inputs: decided on the dtypes the device computes in, run as autocast.py says."""
    inner, computed, run, floats = plan_of(func, dtypes, args, kwargs)
    if inner == policy.FALLBACK:  # the CPU runs the op on the original 64-bit/complex data
        return _run_other(func, inner, dtypes, args, kwargs, new_args, new_kwargs, core)
    if inner == policy.UNSUPPORTED or inner == policy.KERNEL_FAIL:
        return _run_other(func, inner, computed, args, kwargs, new_args, new_kwargs, core)
    if inner == policy.DECOMPOSE or inner == policy.COMPOSITE:
        return policy.run_decomposition(func, computed, args, kwargs, _shapes)
    if run == 1:
        out = func._op(*new_args, **new_kwargs)
        return wrap(numerics.materialize(out), core) if inner == policy.MATERIALIZE else _wrap_out(
            func, out, args, kwargs, core, new_args, new_kwargs)
    if run == 2:
        out = numerics.matmul(func, new_args, new_kwargs) if inner == policy.MATMUL else func._op(
            *new_args, **new_kwargs)
        out = _wrap_out(func, out, args, kwargs, core, new_args, new_kwargs)
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(o, _Tensor) and o.device.type == "neuron":
                autocast.settle_written(host(o))
        return out
    f64 = c128 = False
    cargs, ckw = new_args, new_kwargs
    if autocast._wide:
        autocast.prune_wide()  # dead wide storages: the C++ fast path takes int64 ops again once none is left
    if floats or autocast._wide:  # int64 inputs need a wrap only where a storage may hold values outside int32
        cargs, f64, c128 = autocast.cast_inputs(new_args, is_complex)
        if new_kwargs:
            values, kf64, kc128 = autocast.cast_inputs(list(new_kwargs.values()), is_complex)
            ckw, f64, c128 = dict(zip(new_kwargs, values, strict=True)), f64 or kf64, c128 or kc128
    out = numerics.matmul(func, cargs, ckw) if inner == policy.MATMUL else func._op(*cargs, **ckw)
    out = autocast.restore(out, f64, c128, autocast.output_wraps(func))
    if is_complex:
        out = numerics.host_result(out) if not isinstance(out, torch.Tensor) else numerics.materialize(out)
    return _wrap_out(func, out, args, kwargs, core, new_args, new_kwargs)


def _run_other(func, decision, dtypes, args, kwargs, new_args, new_kwargs, core):
    """The rarer decisions: 64-bit/complex autocast, int64 wrap, decomposition, CPU fallback, typed error."""
    if decision == CAST or decision == COMPLEX:
        return _run_cast(func, dtypes, args, kwargs, new_args, new_kwargs, core, decision == COMPLEX)
    if decision == policy.INT64_OP:
        out = func(*new_args, **new_kwargs)
        return _wrap_out(func, numerics.int64_wrap(out), args, kwargs, core, new_args, new_kwargs)
    if decision == policy.DECOMPOSE or decision == policy.COMPOSITE:
        return policy.run_decomposition(func, dtypes, args, kwargs, _shapes)
    if decision == policy.MATERIALIZE:
        return wrap(numerics.materialize(func(*new_args, **new_kwargs)), core)
    if decision == policy.FALLBACK and _under_fake_fallback():
        out = fallback.run_on_host(func, new_args, new_kwargs)  # shapes for FakeTensorMode: recorded when it runs
        return _wrap_out(func, numerics.host_result(out), args, kwargs, core, new_args, new_kwargs)
    if decision == policy.FALLBACK:
        return _run_on_cpu(func, dtypes, args, kwargs, new_args, new_kwargs, core)
    if decision == policy.KERNEL_FAIL:
        # The decision is cached per (op, dtypes); whether the known failure applies can depend on the values
        # (_grouped_mm's offs), so it is asked per call. None: the native kernel runs.
        issue = policy.kernel_failure(func, dtypes, args, kwargs)
        if issue is None:
            stats.record_executed(func)
            return _wrap_out(func, func._op(*new_args, **new_kwargs), args, kwargs, core, new_args, new_kwargs)
    else:
        issue = None
    err = policy.error_for(func, dtypes, _shapes(args, kwargs))
    if (issue is not None and issue.cpu_retry and CONFIG.cpu_fallback
            and not CONFIG.fallback_only_for_unimplemented):
        # The device kernel failed at execution: torch-neuronx retries the op on the CPU unless
        # TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 (CPUFallbackExecutor; docs/environment_variables.md in
        # the pre-beta source, INDICATIVE).
        return _run_on_cpu(func, dtypes, args, kwargs, new_args, new_kwargs, core, f"kernel failed: {err.reason}")
    if _tracing(new_args) or _under_fake_fallback():
        raise graph_break(func, err)
    node = torch._C._current_autograd_node()
    if node is not None:
        # Inside backward the error is raised at the op, through the engine, as on the real backend: its C++ guard
        # (C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl), torch_neuronx/csrc/core/NeuronGuardImpl.cpp in
        # github.com/parmoham-aws/test-repo-parmoham @ 98154b867aa24562a3213e520d9ad7fd41032291, pre-beta, indicative)
        # runs no Python while the engine unwinds; csrc/ registers one too. The note names the node it came from.
        err.add_note(f"raised in autograd's {node.name()} node, during backward")
    raise err


def _under_fake_fallback() -> bool:
    """FakeTensorMode runs an op without a meta kernel on zero-filled device tensors under ``no_dispatch()`` (Python
    dispatch disabled) to learn its output's shape while Dynamo traces: a fallback op runs on the host unrecorded
    (recorded when the graph runs), a rejected op is a graph break carrying the device's error, as while tracing."""
    return torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python)


def _run_on_cpu(func, dtypes, args, kwargs, new_args, new_kwargs, core, reason: str = ""):
    """The CPU fallback: recorded (and warned once per op), run on the host, the result copied back."""
    stats.record_fallback(func, dtypes, reason=reason)
    out = fallback.run_on_host(func, new_args, new_kwargs)  # widens where the host kernel lacks the dtype
    out = _wrap_out(func, numerics.host_result(out), args, kwargs, core, new_args, new_kwargs)
    _note_entries(out)
    return out


def _note_entries(out) -> None:
    """A CPU-fallback result is host data copied to the device: its int64 values may lie outside int32."""
    for o in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(o, torch.Tensor) and o.dtype is torch.int64:
            autocast.note_entry(o)


def _tracing(inner_args) -> bool:
    """Whether the op runs on fake tensors (Dynamo/AOT tracing an op without a meta kernel through the device)."""
    from torch._subclasses.fake_tensor import FakeTensor

    for a in inner_args:
        if isinstance(a, FakeTensor) or (isinstance(a, list) and any(isinstance(x, FakeTensor) for x in a)):
            return True
    return False


def graph_break(func, err: NeuronUnsupportedOpError) -> Exception:
    """While Dynamo traces, an unsupported op becomes a graph break (like an op without a fake kernel), so the op
    then runs eagerly and raises the typed error itself, instead of Dynamo burying it in a TorchRuntimeError."""
    from torch._subclasses.fake_tensor import UnsupportedOperatorException

    exc = UnsupportedOperatorException(func)
    exc.neuron_error = err
    return exc


_SPECIAL = {
    id(aten._to_copy.default): transfers.to_copy,
    id(aten.copy_.default): transfers.copy_,
    id(aten._local_scalar_dense.default): transfers.local_scalar_dense,
}


def register_special(op, handler) -> None:
    """Route ``op`` on device tensors to ``handler(func, args, kwargs)``, ahead of the op table (collectives.py:
    c10d, functional-collective and FSDP2 ops, which run on a process group rather than as kernels)."""
    _SPECIAL[id(op)] = handler


# Caches built on the decisions elsewhere in the package (attention.py's plans), cleared with them.
_ON_CLEAR: list = []


def on_clear(fn) -> None:
    """Call ``fn()`` whenever the decisions are forgotten (a cache derived from them must go too)."""
    _ON_CLEAR.append(fn)


def clear_cache() -> None:
    """Forget cached decisions (after the profile or the numerics/fallback settings change)."""
    _C.clear_decisions()
    _decisions.clear()
    _plans.clear()
    for fn in _ON_CLEAR:
        fn()
    policy._lowerings.clear()
    autocast.refresh(policy.active().input_autocast, CONFIG.complex_decompose)


# Kernels the C++ core or factories.py register for PrivateUse1 themselves.
_OWN_KERNELS = frozenset({"aten::empty.memory_format", "aten::empty_strided", "aten::set_.source_Storage",
                          "aten::set_.source_Storage_storage_offset", "aten::set_", "aten::_copy_from",
                          "aten::_copy_from_and_resize"})
# Namespaces whose ops run on a process group or as PyTorch's own device kernels (collective_ops.py).
_OWN_NAMESPACES = ("c10d::", "_c10d_functional::", "_dtensor::", "fsdp::")


def composite_explicit_ops() -> list[str]:
    """Ops whose CompositeExplicitAutograd kernel would run for PrivateUse1 ahead of the backend's boxed kernel.

    A tensor subclass saw them undecomposed at the Python key (above every backend kernel); the C++ core registers its
    boxed kernel for each so the device still decides on them (a real backend's op table names such ops too)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    names = []
    for name in torch._C._dispatch_get_all_op_names():
        if name in _OWN_KERNELS or name.startswith(_OWN_NAMESPACES):
            continue
        if (has(name, "CompositeExplicitAutograd") or has(name, "CompositeExplicitAutogradNonFunctional")) \
                and not has(name, "PrivateUse1") and _takes_tensors(name):
            names.append(name)
    return names


def _takes_tensors(name: str) -> bool:
    """Whether the op has a tensor argument: a factory without one (randn, zeros, full) reached the tensor subclass
    only through the ops its composite kernel calls on the device tensor it made, and still does."""
    qualified, _, overload = name.partition(".")
    schema = torch._C._get_schema(qualified, overload)
    return any("Tensor" in str(a.type) for a in schema.arguments)


_C.set_callbacks(dispatch, fast_decision, _resolve, policy.check_device_dtype)
_C.cover(composite_explicit_ops())
clear_cache()
__all__ = ["dispatch", "clear_cache", "register_special", "NeuronUnsupportedOpError", "memory"]
