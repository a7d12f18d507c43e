"""The device's identity on every run (issue 32 item 4): ``identity`` ("neuron (trn2)", "neuron (trn3, strict)",
"cpu"), ``profile`` and ``strict``, backfilled from each stored run's recorded device details; what determines a
run's results (``determinants``, issue 34 item 2: nullable, not backfilled: a run stored before it recorded none,
and an unknown moves nothing); the flake guard's link from a re-run to the run it re-ran (``rerun_of``, issue 34
item 1).

Revision ID: 0012
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0015"
branch_labels = None
depends_on = None

_runs = sa.table("runs", sa.column("id", sa.String), sa.column("device", sa.String),
                 sa.column("device_info", sa.JSON), sa.column("identity", sa.String),
                 sa.column("profile", sa.String), sa.column("strict", sa.Boolean))


def _label(name: str, profile: str | None, strict: bool) -> str:
    # compat.identity.Identity.label as of this revision (a migration keeps its own copy: the code may change later).
    parts = [p for p in (profile, "strict" if strict else None) if p]
    return f"{name} ({', '.join(parts)})" if parts else name


def upgrade() -> None:
    # Plain ADD COLUMN, not a batch: on SQLite a batch that recreates ``runs`` would cascade-delete its results.
    op.add_column("runs", sa.Column("identity", sa.String(96), nullable=False, server_default=""))
    op.add_column("runs", sa.Column("profile", sa.String(32), nullable=True))
    op.add_column("runs", sa.Column("strict", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("runs", sa.Column("determinants", sa.JSON(), nullable=True))
    op.add_column("runs", sa.Column("rerun_of", sa.String(64), nullable=True))
    op.create_index("ix_runs_rerun_of", "runs", ["rerun_of"])
    op.create_index("ix_runs_identity_started", "runs", ["identity", "started"])
    conn = op.get_bind()
    for rid, device, info in conn.execute(sa.select(_runs.c.id, _runs.c.device, _runs.c.device_info)).all():
        details = (info or {}).get("details") or {}
        profile = details.get("profile") or None
        strict = bool(details.get("strict"))
        conn.execute(sa.update(_runs).where(_runs.c.id == rid).values(
            identity=_label(device, profile, strict), profile=profile, strict=strict))


def downgrade() -> None:
    op.drop_index("ix_runs_identity_started", "runs")
    op.drop_index("ix_runs_rerun_of", "runs")
    for col in ("rerun_of", "determinants", "strict", "profile", "identity"):
        op.drop_column("runs", col)  # SQLite >= 3.35 drops a column in place
