"""The run and submission state vocabularies (compat/states.py): stored values unchanged, and written in one place.

A ``str`` enum member equals its stored string, so rows written before the enums read the same (issue 31 item 5).
"""

from __future__ import annotations

import ast
from pathlib import Path

from compat.states import (
    ACTIVE_STATES,
    ENDED_SUBMISSION_STATES,
    FINISHED_STATES,
    RESUMABLE_STATES,
    RunState,
    SubmissionState,
)

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("compat", "service", "worker", "cli", "dashboards")


def test_the_stored_values_are_the_strings_they_always_were() -> None:
    assert [s.value for s in RunState] == ["running", "complete", "incomplete", "interrupted"]
    assert [s.value for s in SubmissionState] == ["queued", "running", "done", "failed"]
    assert FINISHED_STATES == ("complete", "incomplete")
    assert RESUMABLE_STATES == ("interrupted", "incomplete")
    assert ACTIVE_STATES == ("queued", "running")
    assert ENDED_SUBMISSION_STATES == ("done", "failed")
    assert RunState("running") == "running" and str(SubmissionState.DONE) == "done"


def _constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def test_state_words_only_unambiguous_to_states_are_written_once() -> None:
    """"queued", "incomplete" and "interrupted" name nothing but states: as a bare string in product code they
    would be a second copy of the vocabulary ("running", "done", "failed" also name other things, e.g. the pool's
    messages)."""
    words = {"queued", "incomplete", "interrupted"}
    found = {str(p.relative_to(ROOT)): sorted(_constants(p) & words)
             for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py")
             if "migrations" not in p.parts and p.name != "states.py"}
    assert {k: v for k, v in found.items() if v} == {}
