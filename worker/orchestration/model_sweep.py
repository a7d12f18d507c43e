"""``compat sweep --models``: judge each model of a catalog with its own config, shrunk by the architecture rules.

Models whose tiny configs are identical share one run, keyed by the tiny config's digest, so N models cost the
number of distinct tiny configs. A run holds one entry per class, so distinct configs of one class go to successive
runs (rounds). Each model also gets its real-size plan (``worker.build.real_size``); rows are stored per device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from compat.configjson import config_digest
from compat.model_rows import CORPUS_SOURCE, ModelRow
from compat.plan import DEFAULT_BATCH, DEFAULT_TOKENS
from compat.results import ArchitectureEntry, Check, Report, ResultRecord, Scope
from service.model_store import save_models
from service.store import Store
from worker.build.real_size import PlanError, plan_config
from worker.build.tiny_config import TinyConfigError, shrink
from worker.orchestration.sweep import run_sweep
from worker.run.process.devices import Device

CATALOG_SOURCE = CORPUS_SOURCE  # per-model runs: the class reads (service.runs.latest_runs_of) skip them
Progress = Callable[[ArchitectureEntry, list[ResultRecord]], None]


@dataclass
class ModelSweep:
    """What a per-model sweep did: every row (refusals included), the groups by tiny digest, its runs."""

    rows: list[ModelRow]
    groups: dict[str, list[ModelRow]] = field(default_factory=dict)
    reports: list[Report] = field(default_factory=list)

    @property
    def distinct(self) -> int:
        return len(self.groups)

    @property
    def model_runs(self) -> int:
        """Architecture runs made (one per distinct tiny config): never more than ``distinct``."""
        return sum(len(r.architectures) for r in self.reports)


def entry_of(row: ModelRow, rank: int = 1) -> ArchitectureEntry:
    """The harness entry that judges ``row``: its class, its own full config (shrunk by the same rules)."""
    return ArchitectureEntry(name=row.judged_as or row.architecture, model_type=row.model_type, rank=rank,
                             representative=row.model_id, config=row.config)


def tiny_key(row: ModelRow) -> str:
    """The digest of the tiny config ``row`` shrinks to; a config that does not shrink keys on its own digest (its
    run then records the harness's reason)."""
    try:
        return config_digest(shrink(entry_of(row)).to_dict())
    except (TinyConfigError, TypeError, ValueError):
        return f"unbuilt:{row.config_digest}"


def plan_row(row: ModelRow, tokens: int, batch: int) -> dict | None:
    if row.config is None:
        return None
    try:
        return plan_config(row.config, tokens=tokens, batch=batch, class_name=row.judged_as).to_dict()
    except PlanError:
        return None


def rounds(groups: dict[str, list[ModelRow]]) -> list[list[tuple[str, ModelRow]]]:
    """(tiny digest, representative) per run: each run takes at most one distinct config per class."""
    out: list[list[tuple[str, ModelRow]]] = []
    for key, members in groups.items():
        cls = members[0].judged_as
        slot = next((r for r in out if all(m.judged_as != cls for _, m in r)), None)
        if slot is None:
            slot = []
            out.append(slot)
        slot.append((key, members[0]))
    return out


def prepare_models(rows: Iterable[ModelRow], *, tokens: int = DEFAULT_TOKENS,
                   batch: int = DEFAULT_BATCH) -> ModelSweep:
    """Plan every row and group the buildable ones by tiny digest (nothing runs yet)."""
    result = ModelSweep(rows=list(rows))
    for row in result.rows:
        row.plan = plan_row(row, tokens, batch)
        if row.refusal is None:
            row.tiny_digest = tiny_key(row)
            result.groups.setdefault(row.tiny_digest, []).append(row)
    return result


def run_models(result: ModelSweep, device: Device, checks: Iterable[Check | str], *, jobs: int,
               store: Store | None = None, progress: Progress | None = None) -> ModelSweep:
    """Run each distinct tiny config once on ``device``; every model of its group gets that run; store the rows."""
    checks = list(checks)
    for row in result.rows:
        row.device = device.name
    for batch_of_runs in rounds(result.groups):
        entries = [entry_of(rep, rank) for rank, (_, rep) in enumerate(batch_of_runs, start=1)]
        report = run_sweep(entries, device, checks, jobs=jobs, store=store, progress=progress,
                           catalog_source=CATALOG_SOURCE, scope=Scope.SELECTION)
        result.reports.append(report)
        for key, _ in batch_of_runs:
            for member in result.groups[key]:
                member.run_id = report.run.id
    if store is not None:
        save_models(store, result.rows, device.name)
    return result


def sweep_models(rows: Iterable[ModelRow], device: Device, checks: Iterable[Check | str], *, jobs: int,
                 store: Store | None = None, progress: Progress | None = None, tokens: int = DEFAULT_TOKENS,
                 batch: int = DEFAULT_BATCH) -> ModelSweep:
    """Plan, group, run and store: ``prepare_models`` then ``run_models``."""
    return run_models(prepare_models(rows, tokens=tokens, batch=batch), device, checks, jobs=jobs, store=store,
                      progress=progress)
