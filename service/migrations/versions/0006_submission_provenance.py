"""Submission provenance: the config digest and validation notes on the submission; the submitted id, revision and
config digest on its run (a submission no longer writes the catalog row of its architecture).

No 0005 exists: a parallel branch once meant to add it and never did, so this one follows 0004 directly.

Revision ID: 0006
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch_op:
        batch_op.add_column(sa.Column("config_digest", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("notes", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("submission_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("submitted_model_id", sa.String(96), nullable=True))
        batch_op.add_column(sa.Column("submitted_revision", sa.String(128), nullable=True))
        batch_op.add_column(sa.Column("config_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        for name in ("config_digest", "submitted_revision", "submitted_model_id", "submission_id"):
            batch_op.drop_column(name)
    with op.batch_alter_table("submissions") as batch_op:
        batch_op.drop_column("notes")
        batch_op.drop_column("config_digest")
