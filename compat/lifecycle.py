"""The run lifecycle rule: when a ``running`` run has lost its owner and becomes ``interrupted``.

Pure: the caller passes the clock, this host's name and a pid-liveness probe (``pid_alive`` is the one side effect,
kept here so every reaper asks the same question). Applied by ``service.lifecycle.reap``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

# A run whose heartbeat is older than this is interrupted, whoever owns it. Above the longest silence of a live run:
# one architecture may take arch_timeout_s (default 300 s) plus its grace before any result is stored, and the
# sweep's heartbeat ticks every HEARTBEAT_S besides.
DEFAULT_SILENCE_S = 1800.0
HEARTBEAT_S = 30.0


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process on this host. A zombie (exited, not yet waited for) is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    try:
        # /proc/<pid>/stat: "pid (comm) S ..."; the state letter follows the last ')' (Linux; absent elsewhere).
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def lost_owner(*, owner_host: str | None, owner_pid: int | None, heartbeat: datetime | None, now: datetime,
               this_host: str, alive: Callable[[int], bool], silence_s: float = DEFAULT_SILENCE_S) -> str | None:
    """Why a ``running`` run is no longer running (its owner process is gone on this host, or it has been silent
    longer than ``silence_s``), or None while it may still be running. Times are timezone-aware UTC."""
    if owner_host == this_host and owner_pid is not None and not alive(owner_pid):
        return f"owner process {owner_pid} on {owner_host} is gone"
    if heartbeat is not None and (now - heartbeat).total_seconds() > silence_s:
        return f"no heartbeat for {int((now - heartbeat).total_seconds())} s (limit {int(silence_s)} s)"
    return None
