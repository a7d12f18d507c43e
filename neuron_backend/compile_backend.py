"""``torch.compile(model, backend="neuron")`` as documented for TorchNeuron: AOT Autograd with the core-aten
decompositions, one compile check per lowered graph, graph breaks allowed and counted, ``dynamic=True`` refused.

A graph that fails the compile check raises the typed error naming the op while TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION
is on (the default), and runs eagerly (op by op) when it is off.
"""

from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from neuron_backend import policy, stats
from neuron_backend.config import CONFIG
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError

# The device's own Python (dispatch, wrapping, accounting) is runtime, not user code: Dynamo must run it, never
# trace it (it would otherwise try to compile ``wrap`` when a compiled region calls into the device).
torch._dynamo.trace_rules.add("neuron_backend")

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


def _tensor_meta(arg) -> tuple[list, list]:
    vals = arg if isinstance(arg, (list, tuple)) else [arg]
    dtypes, shapes = [], []
    for v in vals:
        meta = getattr(v, "meta", {}).get("val") if isinstance(v, torch.fx.Node) else None
        if isinstance(meta, torch.Tensor):
            dtypes.append(meta.dtype)
            shapes.append(tuple(int(s) if isinstance(s, int) else -1 for s in meta.shape))
    return dtypes, shapes


def check_graph(gm: torch.fx.GraphModule) -> None:
    """Raise the typed error for the first op of ``gm`` the backend cannot compile: an unsupported op or dtype, and in
    strict mode also an op without a Neuron implementation (the real backend lowers a whole graph through torch-mlir
    and StableHLO, not the eager op table, so with fallback allowed those are taken as lowered; low confidence).
    Host reads (``_local_scalar_dense``) are allowed: ``.item()`` is a graph break or a captured scalar.
    """
    autocast = policy.active().input_autocast
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        func = node.target
        dtypes, shapes = [], []
        for a in list(node.args) + list(node.kwargs.values()):
            d, s = _tensor_meta(a)
            dtypes += d
            shapes += s
        dt = node.kwargs.get("dtype")
        if isinstance(dt, torch.dtype):
            dtypes.append(dt)
        dtypes = [autocast.get(d, d) for d in dtypes]
        decision, cls, reason = policy._verdict(func, dtypes)
        if decision == policy.FALLBACK and not CONFIG.cpu_fallback:
            reason = f"strict mode: a compiled graph may hold no op without a Neuron implementation: {reason}"
        elif decision != policy.UNSUPPORTED:
            continue
        raise (cls or NeuronUnsupportedOpError)(
                func._schema.name, [stats.dtype_name(d) for d in dtypes], shapes, reason)


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


def _compiler(gm: torch.fx.GraphModule, example_inputs):
    symbolic = any(isinstance(x, torch.SymInt) for x in example_inputs) or any(
        isinstance(s, torch.SymInt) for x in example_inputs if isinstance(x, torch.Tensor) for s in x.shape)
    try:
        check_graph(gm)
    except NeuronUnsupportedOpError:
        if disable_fallback_execution():
            raise
        _counts["eager_fallbacks"] += 1  # TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0: run the graph eagerly
    stats.record_graph()
    return _per_shape(make_boxed_func(gm.forward), symbolic)


_aot = aot_autograd(fw_compiler=_compiler, bw_compiler=_compiler, decompositions=core_aten_decompositions())


@register_backend(name="neuron")
def neuron(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The Dynamo backend named ``neuron`` (Transformers' static-cache generate asks for it by this name)."""
    if torch._dynamo.config.assume_static_by_default is False:  # what torch.compile(dynamic=True) sets
        raise NeuronDynamicShapesError(DYNAMIC_REFUSED)
    ctx = torch._guards.CompileContext.try_get()
    compile_id = ctx.compile_id if ctx is not None else None
    recompile = bool(compile_id is not None and getattr(compile_id, "frame_compile_id", 0))
    stats.record_compilation(recompile)
    return _aot(gm, example_inputs)


__all__ = ["neuron", "check_graph", "compile_report", "graph_breaks", "reset", "NeuronDynamicShapesError",
           "NeuronUnsupportedOpError", "NeuronUnsupportedDtypeError"]
