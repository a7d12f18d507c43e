"""The field lists of the catalog row and of a run's provenance, written once (as ResultRecord's is for a result).

The store's columns, the API's schemas, the roll-up's and the matrix's rows derive from these or are held to them
(tests/service/test_entity_fields.py).
"""

from __future__ import annotations

from typing import Any

from compat.results import ArchitectureEntry, Provenance

# What the store keeps of a catalog entry, per architecture (its latest catalog row, and each run's own copy): the
# entry less its config and notes, which stay on the entry (snapshot) and its run's records.
CATALOG_ROW_FIELDS: tuple[str, ...] = ("name", "model_type", "rank", "downloads", "representative", "remote_code")
# What a submission run measured: every Provenance field.
PROVENANCE_FIELDS: tuple[str, ...] = tuple(Provenance.model_fields)

if not set(CATALOG_ROW_FIELDS) <= set(ArchitectureEntry.model_fields):
    raise LookupError("CATALOG_ROW_FIELDS: not all ArchitectureEntry fields")


def catalog_row(entry: ArchitectureEntry) -> dict[str, Any]:
    """The catalog row of ``entry``: field -> value, for every field of ``CATALOG_ROW_FIELDS``."""
    return {f: getattr(entry, f) for f in CATALOG_ROW_FIELDS}
