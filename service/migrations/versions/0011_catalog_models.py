"""Models as catalog rows (issue 33): one row per (model, device) with its full config's digest, its plan from
config.json, and the run that judged its tiny config (shared by models whose tiny configs are identical).

New table only; nothing existing changes, so the downgrade drops it.

Revision ID: 0011
Revises: 0012 (main's head when merged; the number 0011 is this change's assigned one)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalog_models",
        sa.Column("model_id", sa.String(200), primary_key=True),
        sa.Column("device", sa.String(64), primary_key=True),
        sa.Column("architecture", sa.String(128), nullable=False),
        sa.Column("judged_as", sa.String(128), nullable=True),
        sa.Column("model_type", sa.String(128), nullable=False, server_default=""),
        sa.Column("source", sa.String(16), nullable=False, server_default="corpus"),
        sa.Column("catalog", sa.String(256), nullable=False, server_default=""),
        sa.Column("sha", sa.String(64), nullable=True),
        sa.Column("config_digest", sa.String(64), nullable=False, server_default=""),
        sa.Column("tiny_digest", sa.String(80), nullable=True),
        sa.Column("downloads", sa.Integer(), nullable=True),
        sa.Column("trending", sa.Float(), nullable=True),
        sa.Column("cited", sa.JSON(), nullable=True),
        sa.Column("refusal", sa.Text(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_catalog_models_architecture", "catalog_models", ["architecture"])


def downgrade() -> None:
    op.drop_index("ix_catalog_models_architecture", table_name="catalog_models")
    op.drop_table("catalog_models")
