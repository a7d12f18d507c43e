"""A result record's stored form: ``compat.results.ResultRecord`` <-> a ``results`` row, and UTC times read back.

Shared by the store (writes) and the queries (reads), so neither imports the other for it. The field list is
``ResultRecord``'s alone: every field is stored in the column of its own name, except those in the small tables
below whose stored form differs; tests/service/test_records.py holds the ORM's columns to that list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import InstrumentedAttribute

from compat.results import Check, ErrorInfo, ResultRecord, Status
from service.models import Result

FIELDS: tuple[str, ...] = tuple(ResultRecord.model_fields)
# A field stored in other columns than the one of its own name: the error's three parts.
STORED_AS: dict[str, tuple[str, ...]] = {"error": ("error_type", "error_message", "error_traceback")}
# Columns no record field reads back: the row's key, and a flag derived from a field on write (indexable).
ROW_ONLY: dict[str, Callable[[ResultRecord], Any]] = {"has_fallback": lambda rec: bool(rec.fallback_ops)}
KEY_COLUMNS: tuple[str, ...] = ("id", "run_id")


def _error_to_columns(error: ErrorInfo | None) -> tuple[Any, ...]:
    return (error.type, error.message, error.traceback) if error else (None, None, None)


def _error_from_columns(etype: str | None, message: str | None, traceback: str | None) -> ErrorInfo | None:
    if etype is None and message is None:
        return None
    return ErrorInfo(type=etype or "", message=message or "", traceback=traceback)


# Per field, how its value becomes its column value(s) and back; a field not named is stored as it is.
# Enums are stored as their value (plain strings: the migrations' column types); JSON columns may hold NULL in rows
# older than their default, read back as the field's empty default.
_TO_COLUMNS: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    "check": lambda v: (str(v),),
    "status": lambda v: (str(v),),
    "fallback_ops": lambda v: (list(v),),
    "error": _error_to_columns,
}
_FROM_COLUMNS: dict[str, Callable[..., Any]] = {
    "check": Check,
    "status": Status,
    "metrics": lambda v: v or {},
    "fallback_ops": lambda v: v or [],
    "error": _error_from_columns,
}


def columns_of(name: str) -> tuple[str, ...]:
    """The ``results`` columns a record field is stored in."""
    return STORED_AS.get(name, (name,))


def checked_fields(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple, each a ``ResultRecord`` field: called at import by every named subset of fields, so a
    renamed or removed field fails loudly there, not as a silently missing value."""
    names = tuple(names)
    unknown = [n for n in names if n not in ResultRecord.model_fields]
    if unknown:
        raise LookupError(f"not ResultRecord fields: {', '.join(unknown)}")
    return names


def select_columns(names: Sequence[str]) -> list[InstrumentedAttribute]:
    """The ``Result`` columns to select for the record fields ``names`` (in order; see ``from_columns``)."""
    return [getattr(Result, col) for name in names for col in columns_of(name)]


def from_columns(names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    """Field values from a row of ``select_columns(names)``: field -> value, as a record holds it."""
    out: dict[str, Any] = {}
    i = 0
    for name in names:
        width = len(columns_of(name))
        convert = _FROM_COLUMNS.get(name)
        parts = values[i:i + width]
        out[name] = convert(*parts) if convert else parts[0]
        i += width
    return out


def aware(value: datetime | None) -> datetime | None:
    """SQLite drops tzinfo; every stored time is UTC, so put it back."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def record_to_row(run_id: str, rec: ResultRecord) -> dict:
    """The one place a record becomes a ``results`` row (column -> value)."""
    row: dict[str, Any] = {"run_id": run_id}
    for name in FIELDS:
        value = getattr(rec, name)
        convert = _TO_COLUMNS.get(name)
        row.update(zip(columns_of(name), convert(value) if convert else (value,), strict=True))
    row.update({col: derive(rec) for col, derive in ROW_ONLY.items()})
    return row


def row_to_record(row: Result) -> ResultRecord:
    """The one place a ``results`` row becomes a record again."""
    return ResultRecord(**from_columns(FIELDS, [getattr(row, col) for name in FIELDS for col in columns_of(name)]))
