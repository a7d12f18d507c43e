"""What changed since the previous run, as pure functions over the service's schemas, so every page
highlights the same (device, check) cells: the matrix, the architecture page and its history table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from service.schemas import ArchitectureDiff, HistoryPoint


def changed_cells(diff: ArchitectureDiff, device: str) -> dict[str, set[tuple[str, str]]]:
    """architecture -> {(device, check)} whose status differs between the diff's runs a and b.

    Architectures new in b are not "changed": there is nothing to compare them with.
    """
    out: dict[str, set[tuple[str, str]]] = {}
    for entry in (*diff.regressions, *diff.fixes, *diff.changed):
        if entry.changed_checks:
            out.setdefault(entry.architecture, set()).update((device, c) for c in entry.changed_checks)
    return out


def history_changes(history: Sequence[HistoryPoint]) -> list[tuple[HistoryPoint, set[str]]]:
    """Each history point (newest first) with the checks whose status differs from the previous run of the
    same device and trigger; the oldest point of each (device, trigger) has nothing to compare with."""
    out: list[tuple[HistoryPoint, set[str]]] = []
    for i, point in enumerate(history):
        older = next((h for h in history[i + 1:] if h.device == point.device and h.trigger == point.trigger), None)
        if older is None:
            out.append((point, set()))
            continue
        checks = set(point.statuses) | set(older.statuses)
        out.append((point, {c for c in checks if point.statuses.get(c) != older.statuses.get(c)}))
    return out


def latest_changes(history: Sequence[HistoryPoint], latest_runs: Iterable[str]) -> set[tuple[str, str]]:
    """(device, check) changed in the given latest runs (one per device), from ``history_changes``."""
    wanted = set(latest_runs)
    return {(p.device, c) for p, checks in history_changes(history) if p.run_id in wanted for c in checks}
