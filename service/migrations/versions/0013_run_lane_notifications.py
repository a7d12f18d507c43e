"""Run lane and notification state (issue 34 items 4 and 5): the lane a run belongs to (``pinned``: the project's
pins; ``transformers-latest``: the newest transformers over them), its own identity and baseline; and what the run's
notifications (webhook, GitHub issues) did, recorded once they were tried.

Existing runs are the pinned lane's (server default); notifications are nullable (not tried).

Revision ID: 0013
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("lane", sa.String(32), nullable=False, server_default="pinned"))
        batch_op.add_column(sa.Column("notifications", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("notifications")
        batch_op.drop_column("lane")
