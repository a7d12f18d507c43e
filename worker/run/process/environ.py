"""One environment variable set for the length of a block and put back after it (removed if it was unset).

Child processes started inside the block inherit the value: pool workers for the decision switches and blocker
chains, and the forkserver that forks 2-rank groups.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def environ_set(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` inside the block; the previous value (or its absence) afterwards."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
