"""The one ``__torch_dispatch__`` of the device: unwrap, look up the cached decision per (op, dtypes), run, wrap.

Decisions come from policy.py (op table, decompositions, fallback); device-transfer ops are handled here.
"""

from __future__ import annotations

import torch

from neuron_backend import autocast, deferred, fallback, memory, numerics, policy, stats, transfers
from neuron_backend.aliases import WRITE_ALIASES as _write_aliases
from neuron_backend.aliases import wrap_out as _wrap_out
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedOpError
from neuron_backend.tensor import NeuronTensor, set_dispatch, wrap

aten = torch.ops.aten
_CPU = torch.device("cpu")
_Tensor = torch.Tensor
# deferred.HELD bound once: the list is only ever changed in place (append/pop/clear), and this test runs per op.
_HELD = deferred.HELD

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


def dispatch(func, args, kwargs):
    # Caches are keyed by id(func): OpOverloads are per-process singletons and their __hash__ is Python code.
    if _HELD and not deferred.in_engine_cpp_node():
        deferred.raise_held()  # an error backward could not raise (deferred.py)
    fid = id(func)
    special = _SPECIAL.get(fid)
    if special is not None:
        return special(func, args, kwargs)
    core = -1
    dtypes = []
    new_args = []
    for a in args:
        t = type(a)
        if t is NeuronTensor:
            if core != a._core:
                if core >= 0:
                    raise _cross_core(func, core, a._core)
                core = a._core
            dtypes.append(a.dtype)
            new_args.append(a._data)
        elif t is list or t is tuple:
            if a and isinstance(a[0], _Tensor) or (len(a) > 1 and isinstance(a[-1], _Tensor)):
                inner = []
                for x in a:
                    if type(x) is NeuronTensor:
                        if core != x._core:
                            if core >= 0:
                                raise _cross_core(func, core, x._core)
                            core = x._core
                        dtypes.append(x.dtype)
                        inner.append(x._data)
                    elif isinstance(x, _Tensor) and x.device.type == "neuron":
                        inner.append(x.to(_CPU))  # plain fake "neuron" tensor while tracing (see above)
                    else:
                        inner.append(x)
                new_args.append(inner)
            else:
                new_args.append(a)
        elif t is _Tensor or isinstance(a, _Tensor):
            if a.device.type == "neuron":
                # Only while tracing: a factory under FakeTensorMode yields a plain fake "neuron" tensor. Moving it to
                # the host is a traced op, so the compiled graph stays consistent with the wrapped inputs.
                new_args.append(a.to(_CPU))
                continue
            if a.dim() > 0 and fid not in _MIXED_OK:
                raise _mixed_device(func, a)
            new_args.append(a)
        else:
            new_args.append(a)
    if kwargs:
        new_kwargs = {}
        for k, v in kwargs.items():
            if type(v) is NeuronTensor:
                if core < 0:
                    core = v._core
                dtypes.append(v.dtype)
                v = v._data
            elif k == "device" and v is not None and torch.device(v).type == "neuron":
                v = _CPU
            elif (type(v) is list or type(v) is tuple) and v and type(v[0]) is NeuronTensor:
                # a tensor-list out= (split_with_sizes_copy.out, which FSDP2 calls): write into the host data
                dtypes.extend(x.dtype for x in v)
                v = type(v)(x._data for x in v)
            new_kwargs[k] = v
        dt = kwargs.get("dtype")
        if dt is not None and type(dt) is torch.dtype:
            dtypes.append(dt)  # the requested result dtype is part of the decision (sum(dtype=float64))
    else:
        new_kwargs = kwargs
    if core < 0:
        core = 0
    key = (fid, *dtypes)
    decision = _decisions.get(key)
    if decision is None:
        decision = _decide(func, dtypes, args, kwargs)
        _decisions[key] = decision
    if decision == 0:  # policy.NATIVE; func._op skips OpOverload.__call__'s extra Python frame
        out = func._op(*new_args, **new_kwargs)
    elif decision == policy.MATMUL:
        out = numerics.matmul(func, new_args, new_kwargs)
    else:
        return _run_other(func, decision, dtypes, args, kwargs, new_args, new_kwargs, core)
    # The common result, one fresh tensor of an op that writes no input (alias map already known to be empty), is
    # wrapped here: one Python frame less than _wrap_out on the path every native op takes.
    if type(out) is _Tensor and _write_aliases.get(fid) == ():
        return wrap(out, core)
    return _wrap_out(func, out, args, kwargs, core)


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


def _run_cast(func, dtypes, args, kwargs, new_args, new_kwargs, core, is_complex: bool):
    """An op with 64-bit or complex inputs: decided on the dtypes the device computes in, run as autocast.py says."""
    key = (id(func), *dtypes)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _plan(func, dtypes, args, kwargs)
    inner, computed, run, floats = plan
    if inner == policy.FALLBACK:  # the CPU runs the op on the original 64-bit/complex data
        return _run_other(func, inner, dtypes, args, kwargs, new_args, new_kwargs, core)
    if inner == policy.UNSUPPORTED or inner == policy.KERNEL_FAIL:
        return _run_other(func, inner, computed, args, kwargs, new_args, new_kwargs, core)
    if inner == policy.DECOMPOSE or inner == policy.COMPOSITE:
        return policy.run_decomposition(func, computed, args, kwargs, _shapes)
    if run == 1:
        out = func._op(*new_args, **new_kwargs)
        return wrap(numerics.materialize(out), core) if inner == policy.MATERIALIZE else _wrap_out(
            func, out, args, kwargs, core)
    if run == 2:
        out = numerics.matmul(func, new_args, new_kwargs) if inner == policy.MATMUL else func._op(
            *new_args, **new_kwargs)
        out = _wrap_out(func, out, args, kwargs, core)
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if type(o) is NeuronTensor:
                autocast.settle_written(o._data)
        return out
    f64 = c128 = False
    cargs, ckw = new_args, new_kwargs
    if floats or autocast._wide:  # int64 inputs need a wrap only where a storage may hold values outside int32
        cargs, f64, c128 = autocast.cast_inputs(new_args, is_complex)
        if new_kwargs:
            values, kf64, kc128 = autocast.cast_inputs(list(new_kwargs.values()), is_complex)
            ckw, f64, c128 = dict(zip(new_kwargs, values, strict=True)), f64 or kf64, c128 or kc128
    out = numerics.matmul(func, cargs, ckw) if inner == policy.MATMUL else func._op(*cargs, **ckw)
    out = autocast.restore(out, f64, c128, autocast.output_wraps(func))
    if is_complex:
        out = numerics.host_result(out) if not isinstance(out, torch.Tensor) else numerics.materialize(out)
    return _wrap_out(func, out, args, kwargs, core)


def _run_other(func, decision, dtypes, args, kwargs, new_args, new_kwargs, core):
    """The rarer decisions: 64-bit/complex autocast, int64 wrap, decomposition, CPU fallback, typed error."""
    if decision == CAST or decision == COMPLEX:
        return _run_cast(func, dtypes, args, kwargs, new_args, new_kwargs, core, decision == COMPLEX)
    if decision == policy.INT64_OP:
        out = func(*new_args, **new_kwargs)
        return _wrap_out(func, numerics.int64_wrap(out), args, kwargs, core)
    if decision == policy.DECOMPOSE or decision == policy.COMPOSITE:
        return policy.run_decomposition(func, dtypes, args, kwargs, _shapes)
    if decision == policy.MATERIALIZE:
        return wrap(numerics.materialize(func(*new_args, **new_kwargs)), core)
    if decision == policy.FALLBACK:
        return _run_on_cpu(func, dtypes, args, kwargs, new_args, new_kwargs, core)
    if decision == policy.KERNEL_FAIL:
        # The decision is cached per (op, dtypes); whether the known failure applies can depend on the values
        # (_grouped_mm's offs), so it is asked per call. None: the native kernel runs.
        issue = policy.kernel_failure(func, dtypes, args, kwargs)
        if issue is None:
            stats.record_executed(func)
            return _wrap_out(func, func._op(*new_args, **new_kwargs), args, kwargs, core)
    else:
        issue = None
    err = policy.error_for(func, dtypes, _shapes(args, kwargs))
    if (issue is not None and issue.cpu_retry and CONFIG.cpu_fallback
            and not CONFIG.fallback_only_for_unimplemented):
        # The device kernel failed at execution: torch-neuronx retries the op on the CPU unless
        # TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 (CPUFallbackExecutor; docs/environment_variables.md in
        # the pre-beta source, INDICATIVE).
        return _run_on_cpu(func, dtypes, args, kwargs, new_args, new_kwargs, core, f"kernel failed: {err.reason}")
    if _tracing(new_args):
        raise _graph_break(func, err)
    if deferred.in_engine_cpp_node():  # raising here would abort the process: hold it, compute on the host
        deferred.hold(err)
        return _run_on_cpu(func, dtypes, args, kwargs, new_args, new_kwargs, core, record=False)
    raise err


def _run_on_cpu(func, dtypes, args, kwargs, new_args, new_kwargs, core, reason: str = "", record: bool = True):
    """The CPU fallback: recorded (and warned once per op), run on the host, the result copied back. ``record``
    False: an op whose error is held (deferred.py), not a fallback."""
    if record:
        stats.record_fallback(func, dtypes, reason=reason)
    out = fallback.run_on_host(func, new_args, new_kwargs)  # widens where the host kernel lacks the dtype
    _note_entries(out)
    return _wrap_out(func, numerics.host_result(out), args, kwargs, core)


def _note_entries(out) -> None:
    """A CPU-fallback result is host data copied to the device: its int64 values may lie outside int32."""
    for o in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(o, torch.Tensor) and o.dtype is torch.int64:
            autocast.note_entry(o)


def _tracing(inner_args) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    for a in inner_args:
        if isinstance(a, FakeTensor) or (isinstance(a, list) and any(isinstance(x, FakeTensor) for x in a)):
            return True
    return False


def _graph_break(func, err: NeuronUnsupportedOpError) -> Exception:
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
    _decisions.clear()
    _plans.clear()
    for fn in _ON_CLEAR:
        fn()
    policy._lowerings.clear()
    autocast.refresh(policy.active().input_autocast, CONFIG.complex_decompose)


set_dispatch(dispatch)
clear_cache()
__all__ = ["dispatch", "clear_cache", "register_special", "NeuronUnsupportedOpError", "memory"]
