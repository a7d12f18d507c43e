"""Op recording via a TorchDispatchMode: the aten ops (with input dtypes) a model dispatches, and the first one that raised.

Used on the CPU reference to build each architecture's op trace, and around device checks to name the blocking op.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from worker.judge.attribution import format_op


def _dtypes(args: Any, kwargs: Any) -> list[torch.dtype]:
    flat, _ = tree_flatten((args, kwargs))
    return [a.dtype for a in flat if isinstance(a, torch.Tensor)]


class OpRecorder(TorchDispatchMode):
    """Records ``aten::op (Dtypes)`` in order of first use (``record=True``) and the first op that raised.

    The mode sees ops after autograd and CompositeImplicit decomposition, i.e. exactly the ops a backend must
    implement, which is what a blocker ranking needs.
    """

    def __init__(self, record: bool = True) -> None:
        super().__init__()
        self.record = record
        self._ops: dict[str, None] = {}
        self.failing_op: str | None = None

    @property
    def ops(self) -> list[str]:
        return list(self._ops)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        name = None
        if self.record:
            name = format_op(func, _dtypes(args, kwargs))
            self._ops.setdefault(name, None)
        try:
            return func(*args, **kwargs)
        except Exception:
            if self.failing_op is None:
                self.failing_op = name or format_op(func, _dtypes(args, kwargs))
            raise
