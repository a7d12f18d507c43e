"""The ``neuron`` backend's lowered graphs kept in PyTorch's own AOTAutograd cache, so a graph Dynamo captured before
skips AOT Autograd's trace and lowering; the compile check itself runs again on every loaded graph.

How it plugs in (torch 2.13): ``aot_module_simplified`` consults ``AOTAutogradCache`` only when the forward compiler
is a ``SerializableAOTDispatchCompiler`` (torch/_functorch/aot_autograd.py, ``aot_module_simplified``), and a
non-Inductor compiler's result is stored only in the bundled form (``torch._functorch.config.bundled_autograd_cache``;
``AOTAutogradCache.make_entry`` in torch/_functorch/_aot_autograd/autograd_cache.py), which pickles the compiler's
``OutputCode`` (torch/_inductor/output_code.py). ``torch._dynamo.backends.debugging.AOTEagerOutputCode`` is PyTorch's
own such output for a non-Inductor backend; ``NeuronOutputCode`` below follows it, but pickles the graph without its
nodes' metadata (rebuilding their fake tensors cost ~2 ms a node, more than the trace it replaces) and keeps the op
list the compile check reads beside it.

The key is PyTorch's (``autograd_cache_key``: the Dynamo graph's code, every input's dtype/shape/stride/device and
subclass metadata, grad mode, autocast state, the functorch/Inductor configs, the torch version and system) plus
``backend_id()``, carried in ``AOTConfig.precompile_backend_id`` (read from the graph module's ``_backend_id`` in
``aot_module_simplified`` and hashed by ``AOTAutogradCachePickler._reduce_aot_config``): this package's source and
profile tables and the device's live settings (profile, switches, fallback, numerics), because AOT Autograd traces
through the device's dispatcher, so they shape the lowered graph. PyTorch's switches turn it off
(``TORCHINDUCTOR_AUTOGRAD_CACHE=0``, ``TORCHINDUCTOR_FORCE_DISABLE_CACHES=1``); it lives under PyTorch's cache folder
(``TORCHINDUCTOR_CACHE_DIR``, default ``/tmp/torchinductor_$USER``), in ``aotautograd/``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache
from torch._inductor.output_code import OutputCode
from torch._subclasses import FakeTensorMode
from torch.fx._graph_pickler import GraphPickler, Options
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.graph import _BoxedCodeGen

from neuron_backend.config import CONFIG

FORMAT = 1  # bump when what an entry holds changes incompatibly (old entries then miss)
_PACKAGE = Path(__file__).parent


# One lowered op as the compile check reads it: (schema name, overload name, input dtypes, input shapes).
GraphOp = tuple[str, str, tuple[torch.dtype, ...], tuple[tuple[int, ...], ...]]


@functools.cache
def package_digest() -> str:
    """sha256 of this package's Python and C++ source and profile tables: another device build is another entry."""
    h = hashlib.sha256()
    csrc = _PACKAGE / "csrc"
    for path in sorted([*_PACKAGE.glob("*.py"), *(_PACKAGE / "hardware").rglob("*.py"),
                        *(_PACKAGE / "hardware" / "profiles").glob("*.json"), *csrc.glob("*.cpp"), *csrc.glob("*.h")]):
        h.update(f"{path.relative_to(_PACKAGE)}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def backend_id() -> str:
    """This backend's part of the cache key: the entry format, the package digest and the live device settings."""
    settings = repr(dataclasses.asdict(CONFIG))
    return "neuron-" + hashlib.sha256(f"{FORMAT}|{package_digest()}|{settings}".encode()).hexdigest()[:40]


def _tensor_meta(arg: Any) -> tuple[list, list]:
    vals = arg if isinstance(arg, (list, tuple)) else [arg]
    dtypes, shapes = [], []
    for v in vals:
        meta = getattr(v, "meta", {}).get("val") if isinstance(v, torch.fx.Node) else None
        if isinstance(meta, torch.Tensor):
            dtypes.append(meta.dtype)
            shapes.append(tuple(int(s) if isinstance(s, int) else -1 for s in meta.shape))
    return dtypes, shapes


def graph_ops(gm: torch.fx.GraphModule) -> list[GraphOp]:
    """The graph's aten calls with their input dtypes (a ``dtype=`` keyword included) and shapes, in graph order."""
    ops: list[GraphOp] = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        dtypes, shapes = [], []
        for a in list(node.args) + list(node.kwargs.values()):
            d, s = _tensor_meta(a)
            dtypes += d
            shapes += s
        dt = node.kwargs.get("dtype")
        if isinstance(dt, torch.dtype):
            dtypes.append(dt)
        ops.append((node.target._schema.name, node.target._overloadname, tuple(dtypes), tuple(shapes)))
    return ops


def resolve(schema_name: str, overload: str) -> torch._ops.OpOverload:
    """The OpOverload a GraphOp names (``aten::mm``, ``default``)."""
    namespace, _, name = schema_name.partition("::")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


@dataclasses.dataclass
class NeuronOutputCode(OutputCode):
    """A lowered graph as the cache stores it: the graph (run boxed), its pickle, and the op list the check reads.

    A graph read back from the cache runs the function given to ``on_load`` once (the backend's compile check and
    its counts), where a freshly lowered graph ran them in the compiler.
    """

    gm: torch.fx.GraphModule | None = None
    ops: list[GraphOp] = dataclasses.field(default_factory=list)
    _pickled_gm: bytes | None = dataclasses.field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.gm is not None:
            # Pickled now, before the boxed calling convention is set (a load sets it again); a graph that does not
            # pickle is simply not stored.
            self._pickled_gm = _dumps(self.gm)
            _boxed(self.gm)
        self._boxed_call = True

    def __call__(self, inputs: Sequence[Any]) -> Any:
        assert self.gm is not None
        return self.gm.forward(inputs)

    def prepare_for_serialization(self) -> None:
        # Called on a shallow copy (BundledOutputCodeLoadable.pre_save): the live object keeps its graph.
        if self._pickled_gm is None:
            raise BypassAOTAutogradCache("the lowered graph could not be pickled")
        self.gm = None

    def post_compile(self, *args: Any, **kwargs: Any) -> None:
        if self.gm is not None or self._pickled_gm is None:
            return  # freshly compiled: the compiler ran the check
        self.gm = _boxed(_loads(self._pickled_gm))
        if _ON_LOAD:
            _ON_LOAD[0](self.ops)

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass


# The compile check the backend runs on a loaded graph (compile_backend registers it; this module cannot import it).
_ON_LOAD: list[Callable[[list[GraphOp]], None]] = []


def on_load(fn: Callable[[list[GraphOp]], None]) -> None:
    """Register the check a loaded graph runs (one per process: the backend's)."""
    _ON_LOAD[:] = [fn]


def _dumps(gm: torch.fx.GraphModule) -> bytes | None:
    """The graph as GraphPickler writes it, without node metadata (the check keeps its op list apart): nodes and
    their targets by name, no re-trace on load (GraphModule's own pickle re-traces the code, which would run a
    factory call such as ``arange(device="neuron")`` for real and bake its result in). None if it cannot pickle."""
    metas = [node.meta for node in gm.graph.nodes]
    try:
        for node in gm.graph.nodes:
            node.meta = {}
        return GraphPickler.dumps(gm, Options(ops_filter=None))
    except Exception:  # noqa: BLE001 - caching is an optimisation, never a compile failure
        return None
    finally:
        for node, meta in zip(gm.graph.nodes, metas, strict=True):
            node.meta = meta


def _loads(data: bytes) -> torch.fx.GraphModule:
    # No node carries a fake tensor, so the fake mode GraphPickler asks for is never used to rebuild one.
    return GraphPickler.loads(data, FakeTensorMode(shape_env=ShapeEnv()))


def _boxed(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    gm.graph.set_codegen(_BoxedCodeGen())
    gm.recompile()
    return gm


__all__ = ["FORMAT", "GraphOp", "NeuronOutputCode", "backend_id", "graph_ops", "on_load", "package_digest",
           "resolve"]
