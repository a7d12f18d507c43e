"""neuron_backend: a simulated AWS Trainium (Trn2 / Trn3) PyTorch device named ``neuron``: a C++ PrivateUse1 core
(csrc/: allocator, device guard, one boxed kernel with a decision cache) over a Python hardware model.

What it models: PrivateUse1 registration (``torch.neuron``, ``Tensor.neuron()``, ``device_map="neuron"``); the
hardware of the active profile (NEURON_PROFILE, default trn2: 8 NeuronCore-v3 and 96 GiB per chip; trn3: 8 NC-v4,
144 GiB) grouped by the Logical NeuronCore setting (NEURON_LOGICAL_NC_CONFIG) into devices; an explicit op table per
profile (hardware/profiles/*.json) with per-op dtypes; torch-neuronx's eager semantics: ops without a device implementation run
on the CPU by default (one warning per op, recorded: fallback_ops(), get_fallback_ops()), a device kernel the profile
says fails is retried on the CPU (unless TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1), strict mode
(NEURON_CPU_FALLBACK=0) falls back nothing and raises typed errors (NeuronUnsupportedOpError /
NeuronUnsupportedDtypeError) naming op, dtypes and shapes; float64/int64 inputs computed as float32/int32 and complex
ops decomposed (autocast.py); only the fnuz FP8 types rejected; ops outside the table lowered through ``torch._decomp``
first; where the host kernel lacks the dtype too (integer histc) the fallback runs the op's decomposition or a widened
copy cast back (fallback.py); compiler-style bf16 matmul numerics (NEURON_AUTOCAST_MATMUL); a caching allocator per
device (memory.py: pools, size classes, reserved >= allocated) with torch.OutOfMemoryError; a ``neuron``
torch.compile backend (AOT Autograd + core-aten decompositions, op-table check, recompilation counts).

What it does not model: performance, asynchronous execution, collective bandwidth (collectives.py models semantics),
the real compiler's fusion and precision choices beyond matmul auto-cast, allocator segments and fragmentation, and
ops' internal numerics other than operand rounding. Device memory is host memory; device tensors are plain
``torch.Tensor``s (parameters ``nn.Parameter``s). Conjugate and negative views (``_conj``, ``_neg_view``) are
materialized copies on the device: values are right, but a later write to the base is not seen through them
(numerics.materialize says why).
Transformers: ``device_map="neuron"``, ``.to("neuron")``, generate and training need no hook. ``device_map="auto"``
does not pick the device, here or on real Trainium: accelerate 1.15.0 ``utils/modeling.py:757 get_max_memory``, which
``"auto"`` sizes devices with, counts CUDA, MLU, SDAA, MUSA, NPU, HPU and XPU devices and has no neuron branch (it
falls back to the CPU), so only ``device_map="neuron"`` targets the device (read from the code, not run on hardware).
Autoload: PyTorch imports this package whenever torch is imported in the venv, through the ``torch.backends`` entry
point ``neuron_backend = "neuron_backend.autoload:load"`` (pyproject.toml; torch 2.13.0 ``torch/__init__.py``
``_import_device_backends``), as TorchNeuron autoloads; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns it off. Once
registered, a ``torch_neuronx`` module stands in ``sys.modules`` (simulated_torch_neuronx.py), so Transformers,
Accelerate and TRL take their Neuron branches as on real Trainium. The ``neuron`` torch.compile backend is entered in
Dynamo's registry when Dynamo is imported, not before (lazy_dynamo.py): registration stays cheap.
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
    from neuron_backend import tracing as _tracing

    _tracing.install()  # the device's rejections apply while Dynamo and AOT Autograd trace on fake tensors
    from neuron_backend import lazy_dynamo as _lazy_dynamo

    _lazy_dynamo.install()  # backend="neuron", known to Dynamo once it is imported
    from neuron_backend import fused as _fused

    _fused.register()
    from neuron_backend import collectives as _collectives  # noqa: F401  (registers torch.distributed backend "neuron")
    from neuron_backend import simulated_torch_neuronx as _simulated_torch_neuronx

    _simulated_torch_neuronx.install()  # last: the libraries that find it expect the device complete

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
    set_cpu_ops,
    set_fallback_only_for_unimplemented,
    set_numerics,
    set_profile,
    set_strict,
    set_switches,
    switches,
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
    "set_cpu_ops",
    "set_switches",
    "switches",
    "unwrap_error",
]
