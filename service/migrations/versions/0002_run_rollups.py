"""Run roll-up columns (architectures, supported, results) written when a run finishes.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("arch_count", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("supported_count", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("result_count", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("result_count")
        batch_op.drop_column("supported_count")
        batch_op.drop_column("arch_count")
