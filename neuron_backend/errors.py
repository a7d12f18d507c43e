"""Typed errors of the simulated device: unsupported op, unsupported dtype, kernel failure, collective (MPS-style).

The harness maps NeuronUnsupportedOpError to status unsupported_op and NeuronUnsupportedDtypeError to unsupported_dtype.
"""

from __future__ import annotations

from collections.abc import Sequence


class NeuronUnsupportedOpError(RuntimeError):
    """An aten op that the device's op table neither runs natively nor can decompose into native ops."""

    kind = "op"

    def __init__(self, op: str, dtypes: Sequence[str], shapes: Sequence[tuple[int, ...]], reason: str = "") -> None:
        self.op = op
        self.dtypes = tuple(dtypes)
        self.shapes = tuple(tuple(s) for s in shapes)
        self.reason = reason
        super().__init__(self._message())

    def _message(self) -> str:
        dt = ", ".join(self.dtypes) or "none"
        sh = ", ".join(str(list(s)) for s in self.shapes) or "none"
        head = {
            "op": f"The operator '{self.op}' is not currently implemented for the neuron device",
            "dtype": f"The operator '{self.op}' is not supported on the neuron device for dtype(s) ({dt})",
            "kernel": f"The neuron kernel of '{self.op}' failed for these inputs",
        }[self.kind]
        # No "set NEURON_CPU_FALLBACK=1" hint: fallback is the default, so the reason says why it did not apply
        # (strict mode, a rejected dtype, a kernel failure the real device does not retry on the CPU).
        why = f" ({self.reason})" if self.reason else ""
        return f"{head}{why}. Input dtypes: ({dt}); input shapes: ({sh})."

    def __reduce__(self):  # picklable across the harness' process pool
        return (type(self), (self.op, self.dtypes, self.shapes, self.reason))


class NeuronUnsupportedDtypeError(NeuronUnsupportedOpError):
    """The op exists on the device, but not for these input dtypes (e.g. float64, complex, histc on Long)."""

    kind = "dtype"


class NeuronKernelError(NeuronUnsupportedOpError):
    """A native kernel that fails at execution for these inputs: a known issue of the profile (retried on the CPU
    unless the real device raises before any fallback, or TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1)."""

    kind = "kernel"


class NeuronUnsupportedCollectiveError(NeuronUnsupportedOpError, NotImplementedError):
    """A collective the real ProcessGroupNeuron does not implement (the real one raises NotImplementedError)."""

    def _message(self) -> str:
        return f"The collective '{self.op}' is not implemented by the neuron process group ({self.reason})."
