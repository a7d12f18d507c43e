"""The catalog row's and provenance's field lists (compat/entities.py) hold every copy of them.

The columns, the API's schemas, the roll-up's and the matrix's rows derive from the lists or must carry each field;
adding a field to one list and not to a copy fails here (issue 31 item 3).
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import inspect

from compat.entities import CATALOG_ROW_FIELDS, PROVENANCE_FIELDS, catalog_row
from compat.results import ArchitectureEntry, Provenance
from dashboards.matrix import MatrixRow
from service import schemas as S
from service.models import Architecture, Run, RunArchitecture
from service.rollup import CatalogRow
from service.run_fields import (
    PROVENANCE_COLUMNS,
    RUN_CATALOG_COLUMNS,
    catalog_columns,
    provenance_columns,
    provenance_of,
)

# Copies that leave a field out on purpose, and why.
LEFT_OUT = {
    "MatrixRow": {"downloads"},  # the matrix sorts by rank; downloads are shown on the list and detail pages
}


def _columns(model: type) -> set[str]:
    return {c.key for c in inspect(model).column_attrs}


def test_catalog_columns_hold_every_field() -> None:
    assert set(CATALOG_ROW_FIELDS) <= _columns(Architecture)
    assert set(RUN_CATALOG_COLUMNS.values()) <= _columns(RunArchitecture)


def test_catalog_copies_hold_every_field() -> None:
    copies = {"ArchitectureRow": set(S.ArchitectureRow.model_fields),
              "ArchitectureDetail": set(S.ArchitectureDetail.model_fields),
              "MatrixRow": {f.name for f in dataclasses.fields(MatrixRow)}}
    for name, fields in copies.items():
        assert set(CATALOG_ROW_FIELDS) - LEFT_OUT.get(name, set()) <= fields, name
    # The roll-up row is exactly the run's copy, the name as "architecture".
    assert {f.name for f in dataclasses.fields(CatalogRow)} == set(RUN_CATALOG_COLUMNS.values())


def test_provenance_columns_and_copies_hold_every_field() -> None:
    assert set(PROVENANCE_COLUMNS) == set(PROVENANCE_FIELDS) == set(Provenance.model_fields)
    assert set(PROVENANCE_COLUMNS.values()) <= _columns(Run)
    # The detail page's history point carries a submission run's provenance under its stored names.
    assert set(PROVENANCE_COLUMNS.values()) <= set(S.HistoryPoint.model_fields)


def test_round_trips() -> None:
    entry = ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=3, downloads=7,
                              representative="org/m", remote_code=False, config={"x": 1}, notes=["n"])
    assert catalog_row(entry) == {"name": "LlamaForCausalLM", "model_type": "llama", "rank": 3, "downloads": 7,
                                  "representative": "org/m", "remote_code": False}
    assert catalog_columns(entry, RUN_CATALOG_COLUMNS)["architecture"] == "LlamaForCausalLM"
    prov = Provenance(submission_id=4, model_id="org/m", revision="abc", config_digest="d" * 64)
    cols = provenance_columns(prov)
    assert cols == {"submission_id": 4, "submitted_model_id": "org/m", "submitted_revision": "abc",
                    "config_digest": "d" * 64}
    assert provenance_of(Run(**cols)) == prov
    assert set(provenance_columns(None).values()) == {None}
