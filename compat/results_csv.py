"""A run's results as CSV: one row per result, one column per record field (``ResultRecord``), the same table for
the API (``GET /api/v1/runs/{id}/results.csv``) and anyone reading records.

The captured ``log`` is left out (multi-line, up to megabytes: served at ``/runs/{id}/log/{architecture}``); the
error is split into type and message; lists are joined with ``; `` and the metrics are JSON. A text cell that a
spreadsheet would run as a formula is prefixed with ``'`` (OWASP "CSV Injection").
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from compat.results import ResultRecord

LEFT_OUT = ("log",)
_FIELDS = [f for f in ResultRecord.model_fields if f not in LEFT_OUT]
COLUMNS = ["run_id", *(c for f in _FIELDS for c in (("error_type", "error_message") if f == "error" else (f,)))]
_FORMULA = ("=", "+", "-", "@", "\t", "\r")  # https://owasp.org/www-community/attacks/CSV_Injection


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, list | tuple):
        value = "; ".join(str(v) for v in value)
    if isinstance(value, bool | int | float):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def row(run_id: str, rec: ResultRecord) -> list[str]:
    """One record as the cells of ``COLUMNS``."""
    out = [_cell(run_id)]
    for f in _FIELDS:
        if f == "error":
            out += [_cell(rec.error.type if rec.error else None), _cell(rec.error.message if rec.error else None)]
        else:
            value = getattr(rec, f)
            out.append(_cell(value.value if hasattr(value, "value") else value))
    return out


def to_csv(run_id: str, records: Iterable[ResultRecord]) -> str:
    """The header row, then one row per record (RFC 4180 quoting, ``\\r\\n`` line ends)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(COLUMNS)
    writer.writerows(row(run_id, r) for r in records)
    return buf.getvalue()
