"""What blocks an architecture: the one rule every surface shows (list and matrix rows, the detail page and API
item, ``compat show``, the verdict line, the blockers ranking and the first link of a blocker chain).

The blocking record is the first record, in check order (``compat.results.CHECK_ORDER``: load, forward, generate,
then the rest), whose status is a failure (``FAILURE_STATUSES``); its ``blocking_op`` is the blocking op (None: the
failure names no op). A ``reference_fail``, ``harness_error`` or ``skipped`` says nothing about the device and never
blocks. Works over any record-like object (a ``ResultRecord``, or a store row reduced to these fields).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from compat.results import CHECK_ORDER, FAILURE_STATUSES, Status


class Outcome(Protocol):
    """One check's outcome as the rule reads it."""

    @property
    def check(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def blocking_op(self) -> str | None: ...


R = TypeVar("R", bound=Outcome)


def _order(r: Outcome) -> tuple[int, str]:
    return CHECK_ORDER.get(str(r.check), len(CHECK_ORDER)), str(r.check)


def blocking_record(records: Iterable[R]) -> R | None:
    """The record that blocks: the first, in check order, with a failure status; None when nothing failed."""
    return min((r for r in records if str(r.status) in FAILURE_STATUSES), key=_order, default=None)


def blocking_op(records: Iterable[Outcome]) -> str | None:
    """The op that blocks (``aten::sort (Int)``), or None: nothing failed, or the blocking failure names no op."""
    found = blocking_record(records)
    return found.blocking_op if found is not None else None


def shown_record(records: Iterable[R]) -> R | None:
    """The record whose error a row shows: the blocking one, else (no failure) the first record, in check order,
    that did not pass (why the architecture has no verdict: a reference_fail, a harness_error)."""
    records = list(records)
    return blocking_record(records) or min((r for r in records if str(r.status) != Status.PASS.value),
                                           key=_order, default=None)
