"""``torch.compile(model, backend="neuron")`` as documented for TorchNeuron: AOT Autograd with the core-aten
decompositions, one compile check per lowered graph, graph breaks allowed and counted, ``dynamic=True`` refused.

Static-shape graphs go through PyTorch's AOTAutograd cache (compile_cache.py): a graph Dynamo captured before is
loaded instead of lowered again, and the compile check runs on it all the same.

A graph that fails the compile check raises the typed error naming the op while TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION
is on (the default), and runs eagerly (op by op) when it is off.
"""

from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch._functorch import config as functorch_config
from torch._functorch._aot_autograd.autograd_cache import should_use_local_autograd_cache
from torch._functorch.aot_autograd import SerializableAOTDispatchCompiler, make_boxed_func

from neuron_backend import compile_cache, policy, stats
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError

DYNAMIC_REFUSED = (
    "torch.compile(backend='neuron', dynamic=True) is not supported: TorchNeuron rejects dynamic=True during "
    "compilation; shapes that vary run by recompiling per new shape (compile with dynamic=None or False). Source: "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html"
)
_counts = {"eager_fallbacks": 0}


class NeuronDynamicShapesError(RuntimeError):
    """``dynamic=True`` asked of the neuron backend (refused during compilation, as the real backend does)."""


def disable_fallback_execution() -> bool:
    """TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default on): a graph that fails to compile raises."""
    return CONFIG.disable_fallback_execution


def graph_breaks() -> int:
    """Graph breaks Dynamo has taken in this process since the last reset (each gives separately compiled graphs)."""
    return sum(torch._dynamo.utils.counters["graph_break"].values())


def compile_report() -> dict[str, int]:
    """Compilations, recompilations and graphs (stats.compile_stats), plus graph breaks and eager fallbacks."""
    return {**stats.compile_stats(), "graph_breaks": graph_breaks(), "eager_fallbacks": _counts["eager_fallbacks"]}


def reset() -> None:
    """Forget the counts (and Dynamo's graph-break counters)."""
    stats.reset_compile_stats()
    torch._dynamo.utils.counters["graph_break"].clear()
    _counts["eager_fallbacks"] = 0


def check_graph(gm: torch.fx.GraphModule) -> None:
    """Raise the typed error for the first op of ``gm`` the backend cannot compile: an op and data dtype a compiler
    rule rejects (the profile's compile_rejects: neuronx-cc error codes), an unsupported op or dtype, and in
    strict mode also an op without a Neuron implementation (the real backend lowers a whole graph through torch-mlir
    and StableHLO, not the eager op table, so with fallback allowed those are taken as lowered; low confidence).
    Host reads (``_local_scalar_dense``) are allowed: ``.item()`` is a graph break or a captured scalar.
    """
    check_ops(compile_cache.graph_ops(gm))


def check_ops(ops: list[compile_cache.GraphOp]) -> None:
    """``check_graph`` over a graph's op list (what a cached graph keeps): the same verdicts, under today's settings."""
    autocast = policy.active().input_autocast
    for schema_name, overload, raw_dtypes, shapes in ops:
        func = compile_cache.resolve(schema_name, overload)
        rule = policy.active().compile_reject(func._schema.name, raw_dtypes[0] if raw_dtypes else None)
        if rule is not None:  # a compiler rule (neuronx-cc error code), whatever the eager op table says
            raise NeuronUnsupportedDtypeError(func._schema.name, [stats.dtype_name(d) for d in raw_dtypes],
                                              list(shapes), f"[{rule.code}] {rule.reason} ({rule.source})")
        dtypes = [autocast.get(d, d) for d in raw_dtypes]
        decision, cls, reason = policy._verdict(func, dtypes)
        if decision == policy.FALLBACK and not CONFIG.cpu_fallback:
            reason = f"strict mode: a compiled graph may hold no op without a Neuron implementation: {reason}"
        elif decision != policy.UNSUPPORTED:
            continue
        raise (cls or NeuronUnsupportedOpError)(
                func._schema.name, [stats.dtype_name(d) for d in dtypes], list(shapes), reason)


def _shape_key(args) -> tuple:
    return tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)


def _per_shape(fn, symbolic: bool):
    """A graph Dynamo made shape-generic still costs one compilation per new concrete shape on Neuron."""
    if not symbolic:
        return fn
    seen: set = set()

    def run(args):
        key = _shape_key(args)
        if key not in seen:
            if seen:
                stats.record_compilation(True)
            seen.add(key)
        return fn(args)

    run._boxed_call = True
    return run


def _accept(ops: list[compile_cache.GraphOp]) -> None:
    """The compile check of one lowered graph and its counts: run in the compiler, or on a graph loaded from the
    cache (compile_cache.py), so both paths give the same verdict, errors and counts."""
    try:
        check_ops(ops)
    except NeuronUnsupportedOpError:
        if disable_fallback_execution():
            raise
        _counts["eager_fallbacks"] += 1  # TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0: run the graph eagerly
    stats.record_graph()


compile_cache.on_load(_accept)


def _symbolic(example_inputs) -> bool:
    return any(isinstance(x, torch.SymInt) for x in example_inputs) or any(
        isinstance(s, torch.SymInt) for x in example_inputs if isinstance(x, torch.Tensor) for s in x.shape)


def _compiler(gm: torch.fx.GraphModule, example_inputs):
    _accept(compile_cache.graph_ops(gm))
    return _per_shape(make_boxed_func(gm.forward), _symbolic(example_inputs))


def _cached_compiler(gm: torch.fx.GraphModule, example_inputs) -> compile_cache.NeuronOutputCode:
    """``_compiler`` for a static-shape graph, in the form the AOTAutograd cache stores (no per-shape counting:
    a static graph has one shape)."""
    ops = compile_cache.graph_ops(gm)
    _accept(ops)
    return compile_cache.NeuronOutputCode(gm=gm, ops=ops)


_DECOMPOSITIONS = core_aten_decompositions()
_aot = aot_autograd(fw_compiler=_compiler, bw_compiler=_compiler, decompositions=_DECOMPOSITIONS)


def _aot_cached(gm: torch.fx.GraphModule, example_inputs):
    """The cached path (static shapes only: a shape-generic graph keeps its per-shape counting in a closure). A
    SerializableAOTDispatchCompiler is what makes aot_module_simplified consult AOTAutogradCache; built per call
    because AotAutograd wraps the backward compiler's function in place on every call."""
    def serializable():
        return SerializableAOTDispatchCompiler(compile_cache.NeuronOutputCode, _cached_compiler)

    return aot_autograd(fw_compiler=serializable(), bw_compiler=serializable(),
                        decompositions=_DECOMPOSITIONS)(gm, example_inputs)


def neuron(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The Dynamo backend named ``neuron`` (Transformers' static-cache generate asks for it by this name). Dynamo
    registers it from lazy_dynamo's registry entry on first use, and lazy_dynamo keeps the device's modules untraced."""
    if torch._dynamo.config.assume_static_by_default is False:  # what torch.compile(dynamic=True) sets
        raise NeuronDynamicShapesError(DYNAMIC_REFUSED)
    ctx = torch._guards.CompileContext.try_get()
    compile_id = ctx.compile_id if ctx is not None else None
    recompile = bool(compile_id is not None and getattr(compile_id, "frame_compile_id", 0))
    stats.record_compilation(recompile)
    if _symbolic(example_inputs) or not should_use_local_autograd_cache():
        return _aot(gm, example_inputs)  # PyTorch's switches (TORCHINDUCTOR_AUTOGRAD_CACHE=0) give the uncached path
    # The device's settings and build shape the lowered graph (AOT traces through its dispatcher): they join
    # PyTorch's cache key as the backend id (compile_cache.py says where PyTorch reads it).
    gm._backend_id = compile_cache.backend_id()
    with functorch_config.patch(bundled_autograd_cache=True):
        return _aot_cached(gm, example_inputs)


__all__ = ["neuron", "check_graph", "check_ops", "compile_report", "graph_breaks", "reset", "NeuronDynamicShapesError",
           "NeuronUnsupportedOpError", "NeuronUnsupportedDtypeError"]
