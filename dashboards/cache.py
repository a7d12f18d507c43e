"""A small cache of page data keyed by a fingerprint of the results store, so repeated views of the overview
and matrix skip recomputing roll-ups that only change when a run or result is written.

The fingerprint is two cheap queries (newest result id; run count, newest start/finish, runs in progress and the
sum of the runs' ``data_version``, which the store bumps on every write to a run): any write changes it.
Values are ``service.queries`` outputs, so page and API numbers stay one.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from service.models import Result, Run

T = TypeVar("T")


def store_fingerprint(session: Session) -> tuple[Any, ...]:
    """What changes whenever the pages' numbers can change: results added or replaced, runs started or finished."""
    newest_result = session.scalar(select(func.max(Result.id)))
    runs = session.execute(select(
        func.count(Run.id), func.max(Run.started), func.max(Run.finished),
        func.sum(case((Run.state == "running", 1), else_=0)), func.sum(Run.data_version),
    )).one()
    return (newest_result, *runs)


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
