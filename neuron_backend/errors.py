"""Typed errors of the simulated device: unsupported op, unsupported dtype (MPS-style messages).

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
        head = (
            f"The operator '{self.op}' is not currently implemented for the neuron device"
            if self.kind == "op"
            else f"The operator '{self.op}' is not supported on the neuron device for dtype(s) ({dt})"
        )
        why = f" ({self.reason})" if self.reason else ""
        return (
            f"{head}{why}. Input dtypes: ({dt}); input shapes: ({sh}). "
            "Set NEURON_CPU_FALLBACK=1 to run it on the CPU instead (slower)."
        )

    def __reduce__(self):  # picklable across the harness' process pool
        return (type(self), (self.op, self.dtypes, self.shapes, self.reason))


class NeuronUnsupportedDtypeError(NeuronUnsupportedOpError):
    """The op exists on the device, but not for these input dtypes (e.g. float64, complex, histc on Long)."""

    kind = "dtype"
