"""Process-wide observations of the device the harness reads: CPU-fallback ops, host syncs, compilations.

Per process and resettable; the harness runs each model in its own worker process.
"""

from __future__ import annotations

import warnings

_fallback: dict[str, str | None] = {}  # ordered: "aten::histc (Long)" -> reason (None: no device implementation)
_warned: set[str] = set()  # op names warned about
_executed: dict[str, None] = {}  # ordered set of op names run on the device
_host_syncs = [0]
_compile = {"compilations": 0, "recompilations": 0, "graphs": 0}


def dtype_name(dtype) -> str:
    """PyTorch's C++ scalar-type name ("Float", "Long", "BFloat16"), as MPS and CUDA errors print them."""

    return _NAMES.get(dtype) or str(dtype).removeprefix("torch.")


def _names():
    import torch

    return {
        torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
        torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
        torch.bool: "Bool", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
        torch.complex32: "ComplexHalf", torch.float8_e4m3fn: "Float8_e4m3fn", torch.float8_e5m2: "Float8_e5m2",
        torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64",
    }


_NAMES = _names()


def record_fallback(func, dtypes, reason: str = "") -> None:
    """One op ran on the CPU fallback: recorded per (op, dtypes); warned once per op, as torch-neuronx's boxed
    fallback does ("warn once per operation", torch_neuronx/csrc/core/NeuronBindings.cpp, neuron_cpu_fallback, in
    parmoham-aws/test-repo-parmoham @ 98154b867aa24562a3213e520d9ad7fd41032291, pre-beta source, INDICATIVE)."""
    name = func._schema.name
    entry = f"{name} ({', '.join(dict.fromkeys(dtype_name(d) for d in dtypes)) or 'no tensors'})"
    if entry in _fallback:
        return
    _fallback[entry] = reason or None
    if name not in _warned:
        _warned.add(name)
        why = f" ({reason})" if reason else ""
        warnings.warn(
            f"Operator '{name}' fell back to CPU{why}. This may have performance implications "
            "(NEURON_CPU_FALLBACK=0 makes it an error).",
            UserWarning,
            stacklevel=3,
        )


def fallback_ops() -> list[str]:
    return list(_fallback)


def fallback_reasons() -> dict[str, str | None]:
    """entry -> why it fell back: None (no device implementation) or "kernel failed: ..." (retried on the CPU)."""
    return dict(_fallback)


def fallback_op_names() -> list[str]:
    """Op names that fell back, without dtypes (what torch_neuronx.get_fallback_ops() lists)."""
    return list(dict.fromkeys(e.split(" (", 1)[0] for e in _fallback))


def record_executed(func) -> None:
    """An op ran on the device (recorded once per decision, i.e. on the first run of each (op, dtypes))."""
    _executed[func._schema.name] = None


def executed_ops() -> list[str]:
    return list(_executed)


def reset_fallback_ops() -> None:
    _fallback.clear()
    _warned.clear()


def reset_executed_ops() -> None:
    _executed.clear()


def record_host_sync() -> None:
    _host_syncs[0] += 1


# Counters kept elsewhere (the C++ core counts the .item() reads it serves itself), added to the Python one.
_host_sync_sources: list = []


def add_host_sync_source(fn) -> None:
    """Count ``fn()`` among the host syncs as well."""
    _host_sync_sources.append(fn)


def host_syncs() -> int:
    return _host_syncs[0] + sum(fn() for fn in _host_sync_sources)


def compile_stats() -> dict[str, int]:
    return dict(_compile)


def record_compilation(recompile: bool) -> None:
    """One Dynamo graph handed to the backend; ``recompile`` when its frame had been compiled before (guards failed)."""
    _compile["compilations"] += 1
    _compile["recompilations"] += int(recompile)


def record_graph() -> None:
    """One lowered aten graph (forward or backward) that passed the op-table check."""
    _compile["graphs"] += 1


def reset_compile_stats() -> None:
    for k in _compile:
        _compile[k] = 0
