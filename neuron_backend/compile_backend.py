"""``torch.compile(model, backend="neuron")``: AOT Autograd with the core-aten decompositions, an op-table check of
every lowered graph (typed error naming the op), and compilation/recompilation counts (stats.compile_stats).

Host reads inside a graph are rejected; Dynamo graph-breaks on ``.item()`` by default, so eager keeps working.
"""

from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from neuron_backend import policy, stats
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError

# The device's own Python (dispatch, wrapping, accounting) is runtime, not user code: Dynamo must run it, never
# trace it (it would otherwise try to compile ``wrap`` when a compiled region calls into the device).
torch._dynamo.trace_rules.add("neuron_backend")


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
    """Raise the typed error for the first op of ``gm`` that the active profile neither runs nor decomposes."""
    prof = policy.active()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        func = node.target
        dtypes, shapes = [], []
        for a in list(node.args) + list(node.kwargs.values()):
            d, s = _tensor_meta(a)
            dtypes += d
            shapes += s
        name = func._schema.name
        if name in prof.host_sync_ops:
            raise NeuronUnsupportedOpError(name, [], shapes, "a compiled graph cannot read a device value on the host")
        dt = node.kwargs.get("dtype")
        if isinstance(dt, torch.dtype):
            dtypes.append(dt)
        decision, cls, reason = policy._verdict(func, dtypes)
        if decision == policy.UNSUPPORTED:
            raise (cls or NeuronUnsupportedOpError)(name, [stats.dtype_name(d) for d in dtypes], shapes, reason)


def _compiler(gm: torch.fx.GraphModule, example_inputs):
    check_graph(gm)
    stats.record_graph()
    return make_boxed_func(gm.forward)


_aot = aot_autograd(fw_compiler=_compiler, bw_compiler=_compiler, decompositions=core_aten_decompositions())


@register_backend(name="neuron")
def neuron(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The Dynamo backend named ``neuron`` (Transformers' static-cache generate asks for it by this name)."""
    ctx = torch._guards.CompileContext.try_get()
    compile_id = ctx.compile_id if ctx is not None else None
    recompile = bool(compile_id is not None and getattr(compile_id, "frame_compile_id", 0))
    stats.record_compilation(recompile)
    return _aot(gm, example_inputs)


__all__ = ["neuron", "check_graph", "NeuronUnsupportedOpError", "NeuronUnsupportedDtypeError"]
