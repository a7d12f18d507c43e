"""The `compat repro` command a failed record carries, per kind of run: light (no torch), so the orchestration that
picks one for a run does not load the runner in a process that never runs an architecture.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from compat.results import Check

# (architecture, device, check) -> the `compat repro` command that rebuilds what the run built; the sweep picks
# one per run and hands it to the runner (a module-level function or a partial of one: it crosses the pool's pipe).
ReproFn = Callable[[str, str, Check | str], str]


def repro_command(architecture: str, device: str, check: Check | str) -> str:
    """A catalog run's records: the catalog's entry of ``architecture``, shrunk."""
    return f"compat repro {architecture} --device {device} --check {check}"


def submission_repro_command(submission_id: int, architecture: str, device: str, check: Check | str) -> str:
    """A submission run's records: the submitted config (kept on the submission's row), shrunk the same way."""
    return f"compat repro --submission {submission_id} --device {device} --check {check}"


def submission_repro(submission_id: int) -> ReproFn:
    return partial(submission_repro_command, submission_id)
