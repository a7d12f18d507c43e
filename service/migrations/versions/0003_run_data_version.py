"""Run data version (bumped on every write to a run) and catalog downloads per run.

The version keys the in-process cache of per-run roll-ups, so readers in any process see fresh data.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("data_version", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("run_architectures") as batch_op:
        batch_op.add_column(sa.Column("downloads", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("run_architectures") as batch_op:
        batch_op.drop_column("downloads")
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("data_version")
