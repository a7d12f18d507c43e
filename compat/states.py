"""The two state vocabularies of the store: a run's (``RunState``) and a submission's (``SubmissionState``).

``str`` enums: a member equals its stored string, so the database, the JSON and every comparison keep their values.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    """Where a run stands: its owner is running it, it closed with every planned result or without some, or its
    owner died before closing it (``interrupted``, found by compat/lifecycle.py's rule)."""

    RUNNING = "running"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    INTERRUPTED = "interrupted"


class SubmissionState(StrEnum):
    """A submission's way through the queue: waiting, its run under way, and how that run ended."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


# A run that closed (interrupted is not finished: it can be resumed).
FINISHED_STATES: tuple[RunState, ...] = (RunState.COMPLETE, RunState.INCOMPLETE)
# A run `compat resume` may take up again.
RESUMABLE_STATES: tuple[RunState, ...] = (RunState.INTERRUPTED, RunState.INCOMPLETE)
# Submissions that hold a place in the queue (compat.settings: max_queued_submissions, max_queued_per_token).
ACTIVE_STATES: tuple[SubmissionState, ...] = (SubmissionState.QUEUED, SubmissionState.RUNNING)
# Submissions whose run ended: the page stops polling.
ENDED_SUBMISSION_STATES: tuple[SubmissionState, ...] = (SubmissionState.DONE, SubmissionState.FAILED)
