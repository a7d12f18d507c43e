"""The result record's field list is ResultRecord's alone: every field has its column(s), every column a field.

Adding a field to ResultRecord and not to ``models.Result`` (or a column and not a field) fails here.
"""

from __future__ import annotations

import pytest
from service_seed import insert_bare_run, migrate
from sqlalchemy import inspect, select, text

from compat.results import Check, ErrorInfo, ResultRecord, Status
from service import db, records
from service.models import Result
from service.runs import RULE_FIELDS

COLUMNS = {c.key for c in inspect(Result).column_attrs}


def test_every_record_field_has_its_columns() -> None:
    missing = {name: col for name in ResultRecord.model_fields for col in records.columns_of(name)
               if col not in COLUMNS}
    assert not missing, f"ResultRecord fields with no Result column (add the column and a migration): {missing}"


def test_every_result_column_maps_back_to_a_field() -> None:
    mapped = {col for name in ResultRecord.model_fields for col in records.columns_of(name)}
    extra = COLUMNS - mapped - set(records.KEY_COLUMNS) - set(records.ROW_ONLY)
    assert not extra, f"Result columns no ResultRecord field reads (add the field or declare the column): {extra}"


def test_declared_mappings_name_real_fields_and_columns() -> None:
    assert set(records.STORED_AS) <= set(ResultRecord.model_fields)
    assert set(records.ROW_ONLY) | set(records.KEY_COLUMNS) <= COLUMNS


def test_named_field_subsets_are_checked_at_import() -> None:
    assert set(RULE_FIELDS) <= set(ResultRecord.model_fields)
    with pytest.raises(LookupError, match="not ResultRecord fields: no_such_field"):
        records.checked_fields(("status", "no_such_field"))


def _full_record() -> ResultRecord:
    """A record with every field set away from its default, so a field the mapping drops shows."""
    return ResultRecord(
        architecture="LlamaForCausalLM", rank=3, device="neuron", check=Check.GENERATE, status=Status.ERROR,
        metrics={"max_abs": float("inf")}, blocking_op="aten::histc (Long)",
        error=ErrorInfo(type="RuntimeError", message="boom", traceback="tb"), reason="why",
        fallback_ops=["aten::argmax (Long)"], known_issue="https://example.invalid/1", duration_s=1.5,
        peak_mem_mb=12.0, repro="compat repro", log="log text", fp32_max_abs_err=0.0031, fp32_cosine=0.999992)


def test_record_to_row_writes_every_column_and_reads_back_the_same_record() -> None:
    rec = _full_record()
    assert set(rec.model_fields_set) == set(ResultRecord.model_fields), "set every field in _full_record"
    row = records.record_to_row("run1", rec)
    assert set(row) == COLUMNS - {"id"}
    assert (row["check"], row["status"], row["has_fallback"]) == ("generate", "error", True)
    assert type(row["check"]) is str and type(row["status"]) is str  # stored as plain strings
    assert records.row_to_record(Result(**row)) == rec


def test_stored_nulls_read_back_as_the_fields_defaults() -> None:
    row = records.record_to_row("run1", ResultRecord(architecture="A", device="cpu", check=Check.LOAD,
                                                     status=Status.PASS))
    assert row["has_fallback"] is False and row["error_type"] is None
    back = records.row_to_record(Result(**{**row, "metrics": None, "fallback_ops": None}))
    assert back.metrics == {} and back.fallback_ops == [] and back.error is None


def test_rule_subset_reads_like_the_full_record() -> None:
    rec = _full_record()
    row = records.record_to_row("run1", rec)
    values = [row[col] for col in (c.key for c in records.select_columns(RULE_FIELDS))]
    got = ResultRecord.model_construct(**records.from_columns(RULE_FIELDS, values))
    assert {n: getattr(got, n) for n in RULE_FIELDS} == {n: getattr(rec, n) for n in RULE_FIELDS}
    assert isinstance(got.status, Status) and isinstance(got.check, Check)
    assert got.error is None and got.log is None and got.metrics == {}


def test_migration_0010_adds_the_fp32_error_as_null_for_stored_rows(sqlite_url: str) -> None:
    migrate(sqlite_url, "0009")
    insert_bare_run(sqlite_url, "old")
    with db.get_engine(sqlite_url).begin() as conn:
        conn.execute(text("INSERT INTO results (run_id, architecture, device, \"check\", status, metrics, "
                          "fallback_ops, has_fallback, duration_s) VALUES ('old', 'LlamaForCausalLM', 'neuron', "
                          "'forward', 'pass', '{\"max_abs_err\": 0.0, \"cosine\": 1.0}', '[]', false, 0)"))
    migrate(sqlite_url, "0010")
    with db.session_scope(sqlite_url) as s:
        back = records.row_to_record(s.scalars(select(Result)).one())
    # Not measured before the migration: NULL, read back as None (never a made-up 0).
    assert (back.fp32_max_abs_err, back.fp32_cosine, back.metrics["max_abs_err"]) == (None, None, 0.0)
    migrate(sqlite_url, "0009", "downgrade")
    with db.get_engine(sqlite_url).connect() as conn:
        columns = {row[1] for row in conn.execute(text("PRAGMA table_info(results)"))}
    assert "fp32_cosine" not in columns and "fp32_max_abs_err" not in columns
