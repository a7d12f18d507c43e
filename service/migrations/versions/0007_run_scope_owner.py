"""Run scope and owner: whether a run covered its whole catalog or a selection, and who runs it (host, pid,
heartbeat), so a run whose owner died becomes ``interrupted`` instead of ``running`` forever (issue 12).

Existing runs are taken as full (they were the headline before this revision) and have no owner: only the silence
rule applies to them, measured from their start (``service.lifecycle.reap``), so a run left ``running`` by a killed
sweep before this revision is reaped too.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("scope", sa.String(16), nullable=False, server_default="full"))
        batch_op.add_column(sa.Column("owner_host", sa.String(256), nullable=True))
        batch_op.add_column(sa.Column("owner_pid", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("heartbeat", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("end_reason", sa.Text(), nullable=True))
        batch_op.create_index("ix_runs_state", ["state"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_index("ix_runs_state")
        for name in ("end_reason", "heartbeat", "owner_pid", "owner_host", "scope"):
            batch_op.drop_column(name)
