"""neuron_backend: a simulated AWS Trainium (NeuronCore-v2) PyTorch device named ``neuron``, in pure Python.

What it models: PrivateUse1 registration (``torch.neuron``, ``Tensor.neuron()``, ``device_map="neuron"``); an
explicit op table per profile (profiles/*.json, NEURON_PROFILE) with per-op dtypes, no float64/complex, int64 lowered
to int32 (values wrap), rejection of data-dependent output shapes (nonzero, unique, masked_select, boolean indexing)
and of host syncs inside compiled graphs; ops outside the table lowered through ``torch._decomp`` first; typed errors
(NeuronUnsupportedOpError / NeuronUnsupportedDtypeError) naming op, dtypes and shapes; an opt-in CPU fallback
(NEURON_CPU_FALLBACK=1) that records what fell back and, where the host kernel lacks the dtype too (integer histc),
runs the op's decomposition or a widened copy cast back (fallback.py); compiler-style bf16 matmul numerics (NEURON_AUTOCAST_MATMUL);
per-core memory accounting with torch.OutOfMemoryError (NEURON_CORES x NEURON_MEMORY_GB); a ``neuron`` torch.compile
backend (AOT Autograd + core-aten decompositions, op-table check, recompilation counts).

What it does not model: performance, asynchronous execution, collective bandwidth (collectives.py models semantics), the real compiler's fusion
and precision choices beyond matmul auto-cast, memory fragmentation (bytes are exact, allocator overhead is not),
and ops' internal numerics other than operand rounding. Data lives in host memory as CPU tensors. Conjugate and
negative views (``_conj``, ``_neg_view``) are materialized copies on the device: values are right, but a later write
to the base is not seen through them (numerics.materialize says why).
Transformers: ``device_map="neuron"``, ``.to("neuron")``, generate and training need no hook. ``device_map="auto"``
is deliberately not switched on: Transformers/Accelerate pick Neuron only when ``find_spec("torch_neuronx")``
succeeds, and faking that module would also switch on Trainer's Neuron defaults and shadow a real install.
If a real torch-neuronx is installed, nothing is registered and ``SIMULATED`` is False (see ``NOT_REGISTERED_REASON``).
"""

from __future__ import annotations

from neuron_backend import registration
from neuron_backend.api import BACKEND_VERSION as __version__
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError

SIMULATED: bool = registration.register()
NOT_REGISTERED_REASON: str | None = registration.reason_not_registered()

if SIMULATED:
    from neuron_backend import dispatch as _dispatch  # noqa: F401  (installs the tensor's op dispatcher)
    from neuron_backend import factories as _factories
    from neuron_backend import policy as _policy

    _factories._check_dtype = lambda op, dtype: _policy.check_device_dtype(f"aten::{op}", dtype)
    from neuron_backend import compile_backend as _compile_backend  # noqa: F401  (registers backend="neuron")
    from neuron_backend import fused as _fused

    _fused.register()
    from neuron_backend import collectives as _collectives  # noqa: F401  (registers torch.distributed backend "neuron")

from neuron_backend.api import (  # noqa: E402
    clear_op_tracking,
    compile_stats,
    device_info,
    fallback_ops,
    fallback_reasons,
    get_executed_ops,
    get_fallback_ops,
    host_syncs,
    numerics_policy,
    reset_compile_stats,
    reset_fallback_ops,
    set_complex_decompose,
    set_cpu_fallback,
    set_fallback_only_for_unimplemented,
    set_numerics,
    set_profile,
    set_strict,
    unwrap_error,
)

__all__ = [
    "__version__",
    "SIMULATED",
    "NOT_REGISTERED_REASON",
    "NeuronUnsupportedOpError",
    "NeuronUnsupportedDtypeError",
    "fallback_ops",
    "reset_fallback_ops",
    "fallback_reasons",
    "get_fallback_ops",
    "get_executed_ops",
    "clear_op_tracking",
    "numerics_policy",
    "device_info",
    "compile_stats",
    "reset_compile_stats",
    "host_syncs",
    "set_numerics",
    "set_cpu_fallback",
    "set_strict",
    "set_complex_decompose",
    "set_fallback_only_for_unimplemented",
    "set_profile",
    "unwrap_error",
]
