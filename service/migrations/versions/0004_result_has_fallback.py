"""results.has_fallback: whether any op ran on CPU fallback, so roll-ups need not decode JSON per row.

Backfilled from fallback_ops for existing rows.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch_op:
        batch_op.add_column(sa.Column("has_fallback", sa.Boolean(), nullable=False, server_default=sa.false()))
    text = "CAST(fallback_ops AS TEXT)" if op.get_bind().dialect.name == "postgresql" else "fallback_ops"
    op.execute(f"UPDATE results SET has_fallback = ({text} NOT IN ('[]', 'null'))")


def downgrade() -> None:
    with op.batch_alter_table("results") as batch_op:
        batch_op.drop_column("has_fallback")
