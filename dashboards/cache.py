"""A small cache of page data keyed by a fingerprint of the results store, so repeated views of the overview
and matrix skip recomputing roll-ups that only change when a run or result is written.

The fingerprint is ``service.queries.store_fingerprint`` (two cheap queries): any write through the store changes it.
Values are ``service.queries`` outputs, so page and API numbers stay one.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from service.queries import store_fingerprint

T = TypeVar("T")


class PageCache:
    """LRU of (database URL, page key) -> (fingerprint, value).

    ``max_age_s`` is a backstop for writes that bypass ``service.store.Store`` (and so the version bump).
    """

    def __init__(self, maxsize: int = 64, max_age_s: float = 300.0) -> None:
        self._data: OrderedDict[Hashable, tuple[tuple[Any, ...], float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.maxsize, self.max_age_s = maxsize, max_age_s
        self.hits = self.misses = 0

    def get(self, session: Session, key: Hashable, compute: Callable[[], T]) -> T:
        url = str(session.get_bind().url)
        fp = store_fingerprint(session)
        full_key = (url, key)
        now = time.monotonic()
        with self._lock:
            entry = self._data.get(full_key)
            if entry is not None and entry[0] == fp and now - entry[1] < self.max_age_s:
                self._data.move_to_end(full_key)
                self.hits += 1
                return entry[2]
            self.misses += 1
        value = compute()  # outside the lock: two concurrent misses compute twice, never block each other
        with self._lock:
            self._data[full_key] = (fp, now, value)
            self._data.move_to_end(full_key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


PAGE_CACHE = PageCache()
