"""results.fp32_max_abs_err, results.fp32_cosine: a forward's (and compile's) error against the plain fp32 CPU run,
beside the judged error against the CPU at the device's modelled precision (issue 30 item 2).

Rows stored before stay NULL: not measured, never 0.

Revision ID: 0010
Revises: 0011 (main's head when this branch merged; 0010 was this branch's assigned number)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch_op:
        batch_op.add_column(sa.Column("fp32_max_abs_err", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("fp32_cosine", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch_op:
        batch_op.drop_column("fp32_cosine")
        batch_op.drop_column("fp32_max_abs_err")
