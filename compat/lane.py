"""A newer library's lane: which architectures are new in its release ("new in transformers X: ..."), from the
catalog of a run and that of the newest earlier run on another version of the library.

Pure; ``service.history.new_in_release_of`` picks the reference run. A lane is a run's own identity and baseline
(``compat.results.PINNED_LANE`` / ``TRANSFORMERS_LATEST_LANE``; ``service.runs.baseline_run``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

LIBRARY = "transformers"  # the library whose releases bring new architectures (the registry is its)


@dataclass(frozen=True)
class NewInRelease:
    """The architectures of a run's catalog that its reference run (on ``since``) did not have."""

    version: str
    since: str | None  # the reference's version; None: no earlier run on another version to compare with
    reference_run: str | None
    architectures: list[str] = field(default_factory=list)

    def text(self) -> str:
        if self.since is None:
            return f"new in {LIBRARY} {self.version}: not known (no earlier registry run on another version)"
        names = ", ".join(self.architectures) if self.architectures else "none"
        return f"new in {LIBRARY} {self.version}: {names} (since {self.since})"


def new_in_release(current: Iterable[str], version: str,
                   reference: tuple[str, str, Iterable[str]] | None) -> NewInRelease:
    """``current``: the run's catalog, in its order; ``reference``: (run id, its version, its catalog) or None."""
    if reference is None:
        return NewInRelease(version, None, None)
    run_id, since, names = reference
    before = set(names)
    return NewInRelease(version, since, run_id, [n for n in current if n not in before])
