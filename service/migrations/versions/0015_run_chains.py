"""Run chains: each blocked architecture's blocker chain (issue 30), measured on the simulated device by moving its
blocking ops to the CPU fallback, kept on the run so ``compat blockers``, the API and the pages rank what implementing
ops unlocks from the store (``compat.chains``).

Nullable, no backfill: a run measured before this revision has no chains, and only its first blockers are known.

Revision ID: 0015
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("chains", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("chains")
