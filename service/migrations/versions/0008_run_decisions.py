"""Run decisions: what each measured decision switch of the device moves in the run (issue 18), kept on the run so
the API and the pages read the headline's range from the store (``compat.decisions.headline_range``).

Nullable, no backfill: a run measured before this revision has no decisions, and its headline is the plain head.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("decisions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("decisions")
