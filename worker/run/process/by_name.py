"""``resolve``: a function named "module:function", imported only when it is asked for: what a pool task, a run hook
or a rarely-run check names, so a process imports that module's dependencies only if it runs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def resolve(spec: str) -> Callable[..., Any]:
    """The function ``spec`` names ("package.module:function"); ValueError for any other shape."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"a function by name must be 'module:function', got {spec!r}")
    return getattr(importlib.import_module(module), name)
