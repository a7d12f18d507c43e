"""``compat sweep --models``: the shipped corpus's models judged one by one (their own configs, shrunk), planned
at real size, stored per model, and printed grouped under their architecture with the per-model headline.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from cli.console import console, fail
from cli.lookup import print_answer
from cli.progress import arch_note, reporter
from compat.model_rows import ModelRow, valid_model_id
from compat.plan import BASIS
from compat.results import ArchitectureEntry, Check, ResultRecord
from compat.settings import get_settings
from service import model_queries
from service.store import Store
from worker.build.real_size import PlanError, plan_config
from worker.catalog.catalog import CatalogError
from worker.catalog.corpus_models import classify, corpus_rows
from worker.catalog.hub import fetch_config, resolve_endpoint
from worker.catalog.hub_models import SORTS, refresh_models
from worker.orchestration.model_sweep import ModelSweep, prepare_models, run_models
from worker.run.process.devices import DeviceError, resolve_device
from worker.run.process.pool import MemoryLimitTooLow, check_memory_limit

GB = 1e9


def select_rows(rows: list[ModelRow], wanted: list[str] | None) -> list[ModelRow]:
    """The rows named in ``wanted`` (model ids, any case), in that order; all rows when none is named."""
    if not wanted:
        return rows
    by_id = {r.model_id.lower(): r for r in rows}
    missing = [w for w in wanted if w.lower() not in by_id]
    if missing:
        raise fail(f"not in the corpus: {', '.join(missing)} (the corpus's models: `compat lookup --list`)")
    return [by_id[w.lower()] for w in dict.fromkeys(wanted)]


def run(*, device: str, models: list[str] | None, checks: list[Check], jobs: int, store: bool, tokens: int,
        batch: int) -> int:
    try:
        dev = resolve_device(device)
    except DeviceError as exc:
        raise fail(str(exc)) from None
    if jobs > 0:
        try:
            check_memory_limit(get_settings().arch_memory_mb)
        except MemoryLimitTooLow as exc:
            raise fail(str(exc)) from None
    rows = select_rows(corpus_rows(), models)
    sink = Store(get_settings().database_url) if store else None
    prepared = prepare_models(rows, tokens=tokens, batch=batch)
    with reporter(console, prepared.distinct, f"models on {dev.name}") as bar:

        def progress(entry: ArchitectureEntry, recs: list[ResultRecord]) -> None:
            bar.advance(f"{entry.name} ({entry.representative})", arch_note(recs))

        result = run_models(prepared, dev, checks, jobs=jobs, store=sink, progress=progress)
    summary(result, sink, dev.name)
    return 0


def summary(result: ModelSweep, sink: Store | None, device: str) -> None:
    """Per architecture, its models with verdict and plan; then the counts and the per-model headline."""
    answers = {}
    if sink is not None:
        with sink.session() as s:
            answers = {r.model_id: a for r, a in model_queries.list_models(s, device)}
    table = Table(title=f"models on {device} (a cited sample, unranked; plans: {BASIS})", show_lines=False)
    for col in ("architecture", "model", "verdict", "params", "tp", "cores"):
        table.add_column(col, overflow="fold")
    for row in sorted(result.rows, key=lambda r: (r.architecture, r.model_id)):
        ans = answers.get(row.model_id)
        verdict = ans.verdict if ans else ("refused" if row.refusal else "stored off")
        plan = row.plan or {}
        table.add_row(row.architecture, row.model_id, verdict,
                      f"{plan['parameters'] / 1e9:.2f} B" if plan else "-",
                      str(plan.get("tensor_parallel") or "-"), str(plan.get("neuron_cores") or "-"))
    console.print(table)
    refused = sum(1 for r in result.rows if r.refusal)
    console.print(f"models: {len(result.rows)} ({refused} refused: remote code, not a causal LM or a bad config); "
                  f"distinct tiny configs: {result.distinct}; architecture runs: {result.model_runs} in "
                  f"{len(result.reports)} run(s): " + ", ".join(r.run.id[:12] for r in result.reports),
                  highlight=False, soft_wrap=True)
    if sink is not None:
        with sink.session() as s:
            head = model_queries.headline(s, device)
        if head is not None:
            console.print(head.text(), highlight=False, soft_wrap=True)


def refresh(*, limit: int | None, out: Path | None, models_out: Path | None, endpoint: str | None) -> None:
    """``compat catalog refresh --models``: both sorts, configs at their shas, the dated per-model snapshot and the
    architecture ranking (summed downloads) built from it."""
    settings = get_settings()
    n = limit or settings.hub_limit
    snapshot = out or settings.snapshot_path
    target = models_out or snapshot.with_name("models-snapshot.json")
    console.print(f"listing the Hub's {n} text-generation models by {' and by '.join(SORTS)}", highlight=False)
    try:
        snap, catalog = refresh_models(n, target, snapshot, endpoint=endpoint)
    except CatalogError as exc:
        raise fail(str(exc), 1) from None
    for sort, rows in snap.by_sort.items():
        refused = sum(1 for r in rows if r.refusal)
        console.print(f"{sort}: {len(rows)} models ({refused} refused), {snap.created}", highlight=False)
    console.print(f"models snapshot {target}; architecture ranking (summed downloads) {catalog.snapshot_id}: "
                  f"{len(catalog.entries)} architectures", highlight=False, soft_wrap=True)


def lookup_hub(*, model_id: str, device: str | None, as_json: bool, endpoint: str | None) -> None:
    """``compat lookup ORG/NAME --hub``: a stored model as without ``--hub``; an unknown one read from the Hub
    (its config.json, validated, never its code): its architecture's verdict, what its config differs in from the
    judged model of that architecture, and a plan from its config."""
    if not valid_model_id(model_id) or "/" not in model_id:
        raise fail(f"invalid model id {model_id!r}: expected ORG/NAME as on the Hub")
    store = Store(get_settings().database_url)
    with store.session() as s:
        answer = model_queries.lookup(s, model_id, device)
    if answer is None:
        try:
            config = fetch_config(model_id, endpoint=resolve_endpoint(endpoint))
        except Exception as exc:  # noqa: BLE001 - not found, refused or unreachable: one line
            raise fail(f"{model_id}: not stored here and its config.json cannot be read from the Hub "
                       f"({type(exc).__name__}: {str(exc)[:200]}); {model_queries.SUBMIT_HINT}", 1) from None
        refusal, judged = classify(config)
        with store.session() as s:
            answer = model_queries.lookup(s, model_id, device, config=config)
        if answer is None:
            raise fail(f"{model_id}: its architecture {config['architectures'][0]} was never swept here; "
                       f"{model_queries.SUBMIT_HINT}", 1)
        answer.refusal = refusal
        try:
            answer.plan = plan_config(config, class_name=judged).to_dict()
        except PlanError:
            answer.plan = None
    if as_json:
        print(json.dumps(answer.model_dump(mode="json"), indent=1))
    else:
        print_answer(answer)
