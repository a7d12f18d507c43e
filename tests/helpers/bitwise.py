"""Equality to the bit of what a cached reference gives back: tensors of one dtype and ``torch.equal`` (tolerance 0:
a cache entry holds the very tensors computed), dicts walked, anything else ``==``."""

from __future__ import annotations

import torch


def assert_same(a: object, b: object) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b)
        for k in a:
            assert_same(a[k], b[k])
    else:
        assert a == b
