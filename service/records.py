"""A result record's stored form: ``compat.results.ResultRecord`` <-> a ``results`` row, and UTC times read back.

Shared by the store (writes) and the queries (reads), so neither imports the other for it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from compat.results import ErrorInfo, ResultRecord
from service.models import Result


def aware(value: datetime | None) -> datetime | None:
    """SQLite drops tzinfo; every stored time is UTC, so put it back."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def record_to_row(run_id: str, rec: ResultRecord) -> dict:
    return {
        "run_id": run_id,
        "architecture": rec.architecture,
        "device": rec.device,
        "check": str(rec.check),
        "status": str(rec.status),
        "rank": rec.rank,
        "metrics": rec.metrics,
        "blocking_op": rec.blocking_op,
        "error_type": rec.error.type if rec.error else None,
        "error_message": rec.error.message if rec.error else None,
        "error_traceback": rec.error.traceback if rec.error else None,
        "reason": rec.reason,
        "fallback_ops": list(rec.fallback_ops),
        "has_fallback": bool(rec.fallback_ops),
        "known_issue": rec.known_issue,
        "duration_s": rec.duration_s,
        "peak_mem_mb": rec.peak_mem_mb,
        "repro": rec.repro,
        "log": rec.log,
    }


def row_to_record(row: Result) -> ResultRecord:
    error = None
    if row.error_type is not None or row.error_message is not None:
        error = ErrorInfo(type=row.error_type or "", message=row.error_message or "",
                          traceback=row.error_traceback)
    return ResultRecord(
        architecture=row.architecture, rank=row.rank, device=row.device, check=row.check,
        status=row.status, metrics=row.metrics or {}, blocking_op=row.blocking_op, error=error,
        reason=row.reason, fallback_ops=row.fallback_ops or [], known_issue=row.known_issue,
        duration_s=row.duration_s, peak_mem_mb=row.peak_mem_mb, repro=row.repro, log=row.log,
    )
