"""A catalog row and a run's provenance in their stored forms: which columns hold which field, both ways.

The field lists are compat/entities.py's; the store writes through ``catalog_columns``/``provenance_columns`` and the
reads rebuild a ``Provenance`` through ``provenance_of``, so no caller spells the columns out again.
"""

from __future__ import annotations

from typing import Any

from compat.entities import CATALOG_ROW_FIELDS, PROVENANCE_FIELDS, catalog_row
from compat.results import ArchitectureEntry, Provenance
from service.models import Run

# A provenance field is stored on its run under these column names (migration 0006: the run's own columns say
# "submitted" where a bare name would read as the run's own model or revision).
PROVENANCE_COLUMNS: dict[str, str] = {"submission_id": "submission_id", "model_id": "submitted_model_id",
                                      "revision": "submitted_revision", "config_digest": "config_digest"}
# The catalog row's columns in ``run_architectures``: the architecture's name is the ``architecture`` column.
RUN_CATALOG_COLUMNS: dict[str, str] = {f: ("architecture" if f == "name" else f) for f in CATALOG_ROW_FIELDS}

if set(PROVENANCE_COLUMNS) != set(PROVENANCE_FIELDS):
    raise LookupError("PROVENANCE_COLUMNS must name a column for every Provenance field")


def catalog_columns(entry: ArchitectureEntry, columns: dict[str, str] | None = None) -> dict[str, Any]:
    """``entry``'s catalog row as column -> value (``columns``: RUN_CATALOG_COLUMNS for a run's copy)."""
    return {(columns or {}).get(f, f): v for f, v in catalog_row(entry).items()}


def provenance_columns(provenance: Provenance | None) -> dict[str, Any]:
    """Column -> value of a run's provenance (every column None for a run that is not a submission's)."""
    return {col: getattr(provenance, f) if provenance else None for f, col in PROVENANCE_COLUMNS.items()}


def provenance_of(run: Run) -> Provenance:
    """The provenance stored on ``run``."""
    return Provenance(**{f: getattr(run, col) for f, col in PROVENANCE_COLUMNS.items()})
