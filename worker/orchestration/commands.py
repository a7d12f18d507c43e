"""What the harness commands do once their input is parsed: ``compat sweep | show | blockers | repro | catalog
refresh``. ``cli.py`` holds their options and help, and imports this module (torch, the store) only to run one.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from compat.results import ArchitectureEntry, Check, Report, ResultRecord, Status, Trigger
from compat.results import blockers as rank_blockers
from compat.settings import get_settings
from service.store import Store
from worker.build.tiny_config import TinyConfigError, shrink
from worker.catalog.catalog import Catalog, CatalogError, registry_entries
from worker.catalog.load import load_catalog, refresh_snapshot
from worker.orchestration.celery_app import make_app
from worker.orchestration.console import console, fail
from worker.orchestration.executors import CeleryExecutor, ProgressFn, RunOutcome
from worker.orchestration.nightly import format_diff, regression_gate
from worker.orchestration.planning import make_plan
from worker.orchestration.progress import arch_note, fetch_progress, reporter
from worker.orchestration.sweep import run_sweep, write_report
from worker.orchestration.tables import blockers_table, coverage_table, results_table
from worker.orchestration.validate import architecture_error
from worker.run.device_names import device_type
from worker.run.devices import Device, DeviceError, resolve_device
from worker.run.pool import MemoryLimitTooLow, check_memory_limit
from worker.run.repro_finetune import ReproMixError, finetune_repro


def _device(name: str) -> Device:
    """The device under test, resolved here, at the command's edge, once."""
    try:
        return resolve_device(name)
    except DeviceError as exc:
        raise fail(str(exc)) from None


def _store(enabled: bool) -> Store | None:
    return Store(get_settings().database_url) if enabled else None


def _read_report(path: Path) -> Report:
    try:
        return Report.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read report {path}: {exc}") from None


def sweep(*, device: str, source: str, limit: int | None, arch: list[str] | None, checks: list[Check], jobs: int,
          json_path: Path | None, store: bool, trigger: str, broker: bool, baseline: str | None,
          fail_on_regression: bool) -> int:
    """``compat sweep``: run the sweep (here or on the cluster), print the coverage table; the exit code of the
    regression gate when ``baseline`` is given, else 0."""
    dev = _device(device)
    if not broker and jobs > 0:
        try:
            check_memory_limit(get_settings().arch_memory_mb)
        except MemoryLimitTooLow as exc:
            raise fail(str(exc)) from None
    try:
        catalog = _load_catalog(source, None if arch else limit)
    except CatalogError as exc:
        raise fail(str(exc)) from None
    entries = catalog.entries
    if arch:
        known = {e.name: e for e in entries}
        bad = architecture_error(arch, list(known))
        if bad:
            raise fail(bad)
        entries = [known[a] for a in arch][: limit or None]
    with reporter(console, len(entries), f"sweep {dev.name}") as bar:

        def progress(entry: ArchitectureEntry, recs: list[ResultRecord]) -> None:
            bar.advance(entry.name, arch_note(recs))

        if broker:
            report = _broker_sweep(entries, dev, checks, trigger, json_path, catalog,
                                   lambda done, _total: bar.update(done, "stored"))
        else:
            report = run_sweep(entries, dev, checks, jobs=jobs, trigger=trigger, store=_store(store),
                               json_path=json_path, progress=progress, catalog_source=catalog.source,
                               snapshot_id=catalog.snapshot_id)
    console.print(coverage_table(report.results, title=f"coverage on {dev.name} ({dev.info.description})"))
    if json_path:
        console.print(f"report: {json_path}")
    if baseline:
        return _regression_gate(report.run.id, dev.name, baseline, fail_on_regression)
    return 0


def _load_catalog(source: str, limit: int | None) -> Catalog:
    """The sweep's catalog; a live Hub listing shows its progress (it reads one config.json per model)."""
    with fetch_progress(console, get_settings().hub_limit) as on_fetch:
        return load_catalog(source, limit, progress=on_fetch)


def broker_sweep(entries: list[ArchitectureEntry], device: Device, checks: list[Check], *, trigger: Trigger,
                 store: Store, catalog_source: str, snapshot_id: str | None,
                 on_progress: ProgressFn | None = None) -> tuple[RunOutcome, Report]:
    """``compat sweep --broker``: submit to the cluster at COMPAT_BROKER_URL, follow it, and return the outcome
    with the same JSON report an in-process sweep writes."""
    settings = get_settings()
    plan = make_plan(entries, device, checks, trigger=trigger, database_url=store.database_url,
                     workdir=settings.var_dir / "work", seed=settings.seed, catalog_source=catalog_source,
                     snapshot_id=snapshot_id)
    outcome = CeleryExecutor(make_app(settings)).run(store, plan, on_progress)
    run = plan.run.model_copy(update={"finished": datetime.now(UTC)})
    report = Report(run=run, architectures=entries, results=outcome.results, op_traces=store.op_traces(outcome.run_id))
    return outcome, report


def _broker_sweep(entries: list[ArchitectureEntry], device: Device, checks: list[Check], trigger: str,
                  json_path: Path | None, catalog: Catalog, on_progress: ProgressFn) -> Report:
    outcome, report = broker_sweep(entries, device, checks, trigger=Trigger(trigger), store=Store(),
                                   catalog_source=catalog.source, snapshot_id=catalog.snapshot_id,
                                   on_progress=on_progress)
    if outcome.state != "complete":
        console.print(f"run {outcome.run_id} is {outcome.state}: some architectures never reported back")
    if json_path:
        write_report(report, json_path)
    return report


def _regression_gate(run_id: str, device: str, baseline: str, fail_on_regression: bool) -> int:
    diff, code = regression_gate(Store(), run_id, device, baseline, fail_on_regression)
    console.print(format_diff(diff), highlight=False, markup=False)
    return code


def _load_results(json_path: Path | None, device: str | None, architecture: str | None = None,
                  ) -> list[ResultRecord]:
    if json_path is not None:
        recs = _read_report(json_path).results
        return [r for r in recs if (architecture is None or r.architecture == architecture)
                and (device is None or r.device == device)]
    st = Store()
    if architecture is not None:
        return st.latest_results(architecture, device)
    run_id = st.last_run_id(device or get_settings().device)
    return st.run_results(run_id) if run_id else []


def show(*, architecture: str, device: str | None, json_path: Path | None, log: bool) -> None:
    """``compat show``: the latest results of one architecture, its reproducers and (``--log``) its output."""
    recs = _load_results(json_path, device, architecture)
    if not recs:
        bad = architecture_error([architecture], [e.name for e in registry_entries()])
        if bad:
            raise fail(bad)
        raise fail(f"no results for {architecture}{' on ' + device if device else ''}; run `compat sweep` first", 1)
    console.print(results_table(recs, title=architecture))
    for r in recs:
        if r.repro and r.status != Status.PASS:
            console.print(f"repro ({r.check}): {r.repro}", highlight=False)
    if log:
        # Each record carries the output printed since the one before it: together, the architecture's log.
        for r in recs:
            if r.log:
                console.print(r.log, markup=False, highlight=False, end="" if r.log.endswith("\n") else "\n")


def blockers(*, device: str | None, json_path: Path | None, top: int) -> None:
    """``compat blockers``: aten ops ranked by how many architectures each one blocks."""
    recs = _load_results(json_path, device)
    if not recs:
        on = device or (None if json_path else get_settings().device)
        where = (f" on {on}" if on else "") + (f" in {json_path}" if json_path else " in the store")
        raise fail(f"no results{where}; run `compat sweep` first", 1)
    ranked = rank_blockers(recs)
    if not ranked:
        console.print("no blocking ops: nothing failed on an identifiable op")
        return
    console.print(blockers_table(ranked, top))
    for b in ranked[:3]:
        console.print(b.message, highlight=False)


def repro(*, architecture: str, device: str, checks: list[Check], out: Path | None) -> None:
    """``compat repro``: a standalone script reproducing ARCH on DEVICE with the sweep's tiny config and seed."""
    settings = get_settings()
    kind = device_type(device)  # spelling checked by the CLI; no availability check: repro may target another machine
    entries = {e.name: e for e in load_catalog(settings.catalog_source).entries}
    bad = architecture_error([architecture], list(entries))
    if bad:
        raise fail(bad)
    try:
        config = shrink(entries[architecture]).to_dict()
    except TinyConfigError as exc:
        raise fail(f"cannot build a tiny {architecture}: {exc}", 1) from None
    backend = "neuron" if kind == "neuron" else "inductor"
    try:  # fsdp/tp: a torchrun script; lora/sft: the single-process script with their blocks
        script = finetune_repro(architecture, device, config, seed=settings.seed, checks=checks,
                                compile_backend=backend)
    except ReproMixError as exc:
        raise fail(str(exc)) from None
    if out:
        out.write_text(script)
        console.print(f"wrote {out}")
    else:
        sys.stdout.write(script)


def catalog_refresh(*, limit: int | None, out: Path | None, endpoint: str | None) -> None:
    """``compat catalog refresh``: list the Hub's text-generation models and save the ranked snapshot."""
    listed = limit or get_settings().hub_limit
    console.print(f"listing the Hub's {listed} most downloaded text-generation models", highlight=False)
    try:
        with fetch_progress(console, listed) as on_fetch:
            cat = refresh_snapshot(limit, out, endpoint=endpoint, progress=on_fetch)
    except CatalogError as exc:
        raise fail(str(exc), 1) from None
    console.print(f"snapshot {cat.snapshot_id}: {len(cat.entries)} architectures")

