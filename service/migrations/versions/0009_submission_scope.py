"""Submission runs are their own scope: ``scope = 'submission'`` on every run of trigger ``submission`` (issue 19),
and their results' reproducers rebuild the submitted config (``compat repro --submission N``), not the catalog's.

Data only. Before this revision a submission run was stored with scope ``full`` and a reproducer naming the
architecture; the downgrade puts both back.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# worker.run.runner.runner's two forms, as of this revision (a migration keeps its own copy: the code may change later).
_CATALOG = re.compile(r"^compat repro (?P<arch>\S+) (?P<rest>--device .*)$")
_SUBMISSION = re.compile(r"^compat repro --submission \d+ (?P<rest>--device .*)$")

_runs = sa.table("runs", sa.column("id"), sa.column("trigger"), sa.column("scope"), sa.column("submission_id"))
_results = sa.table("results", sa.column("id"), sa.column("run_id"), sa.column("architecture"), sa.column("repro"))


def _rewrite_repro(to_submission: bool) -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(_results.c.id, _results.c.repro, _results.c.architecture, _runs.c.submission_id)
        .select_from(_results.join(_runs, _runs.c.id == _results.c.run_id))
        .where(_runs.c.trigger == "submission", _runs.c.submission_id.is_not(None), _results.c.repro.is_not(None)))
    for rid, repro, arch, sub_id in rows.all():
        m = (_CATALOG if to_submission else _SUBMISSION).match(repro)
        if m is None:
            continue
        new = (f"compat repro --submission {sub_id} {m['rest']}" if to_submission
               else f"compat repro {arch} {m['rest']}")
        conn.execute(sa.update(_results).where(_results.c.id == rid).values(repro=new))


def upgrade() -> None:
    op.execute(sa.update(_runs).where(_runs.c.trigger == "submission").values(scope="submission"))
    _rewrite_repro(to_submission=True)


def downgrade() -> None:
    _rewrite_repro(to_submission=False)
    op.execute(sa.update(_runs).where(_runs.c.scope == "submission").values(scope="full"))
