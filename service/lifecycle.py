"""Run lifecycle in the store: marking ``running`` runs whose owner is lost as ``interrupted`` (``reap``).

The rule is ``compat.lifecycle.lost_owner``; this applies it to the stored runs. Called on the next start
(``Store.start_run``), on the next read (``service.queries``), and by ``compat runs reap``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from compat.lifecycle import DEFAULT_SILENCE_S, lost_owner, pid_alive
from compat.states import RunState
from service.models import Run
from service.records import aware


def this_host() -> str:
    return socket.gethostname()


def reap(session: Session, *, now: datetime | None = None, silence_s: float = DEFAULT_SILENCE_S,
         host: str | None = None, alive: Callable[[int], bool] = pid_alive,
         run_id: str | None = None) -> list[tuple[str, str]]:
    """Mark every ``running`` run (or just ``run_id``) whose owner is lost as ``interrupted``; returns
    (run id, reason) of each one marked. One narrow query when nothing is running."""
    now = now or datetime.now(UTC)
    host = host or this_host()
    q = select(Run).where(Run.state == RunState.RUNNING.value)
    if run_id is not None:
        q = q.where(Run.id == run_id)
    out = []
    for run in session.scalars(q):
        # A run from before owners were recorded (migration 0007) has no heartbeat: its start is its last sign.
        why = lost_owner(owner_host=run.owner_host, owner_pid=run.owner_pid,
                         heartbeat=aware(run.heartbeat or run.started), now=now, this_host=host, alive=alive,
                         silence_s=silence_s)
        if why is None:
            continue
        run.state, run.end_reason = RunState.INTERRUPTED.value, why
        run.data_version = (run.data_version or 0) + 1
        out.append((run.id, why))
    if out:
        session.flush()
    return out
