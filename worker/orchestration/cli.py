"""The ``compat`` command line (Typer): sweep, show, blockers, repro, catalog refresh (others add db/serve/...).

One function per command; bad input is one line on stderr naming the valid choices, exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from compat.results import ALL_CHECKS, DEFAULT_CHECKS, Check, Report, ResultRecord, Status
from compat.settings import get_settings

app = typer.Typer(help="Which Hugging Face causal-LM architectures run correctly on a device, and why not.",
                  no_args_is_help=True, add_completion=False)
catalog_app = typer.Typer(help="The architecture catalog.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")
console = Console()
SOURCES = ("auto", "hub", "snapshot", "registry")


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one line to stderr and return the Exit to raise (bad input = 2)."""
    Console(stderr=True).print(f"error: {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def parse_checks(values: list[str] | None) -> list[Check]:
    """``--checks load,forward --checks compile`` -> checks; ``all`` = the five, ``default`` = the four."""
    if not values:
        return list(DEFAULT_CHECKS)
    out: list[Check] = []
    valid = [str(c) for c in ALL_CHECKS]
    for item in ",".join(values).split(","):
        name = item.strip().lower()
        if not name:
            continue
        if name in ("all", "default"):
            out.extend(c for c in (ALL_CHECKS if name == "all" else DEFAULT_CHECKS) if c not in out)
        elif name in valid:
            if Check(name) not in out:
                out.append(Check(name))
        else:
            raise fail(f"unknown check {name!r}; valid checks: {', '.join(valid)} (or all, default)")
    return out


def _device(name: str):  # noqa: ANN202
    from worker.run.devices import DeviceError, resolve_device

    try:
        return resolve_device(name)
    except DeviceError as exc:
        raise fail(str(exc)) from None


def _store(enabled: bool):  # noqa: ANN202
    if not enabled:
        return None
    from service.store import Store

    return Store(get_settings().database_url)


def _read_report(path: Path) -> Report:
    try:
        return Report.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read report {path}: {exc}") from None


@app.command()
def sweep(
    device: str = typer.Option(None, "--device", "-d", help="neuron (default), cpu, cuda, mps, xpu[:N]"),
    source: str = typer.Option(None, "--source", help="catalog source: auto, hub, snapshot, registry"),
    limit: int = typer.Option(None, "--limit", min=1, help="first N architectures of the catalog"),
    arch: list[str] = typer.Option(None, "--arch", "-a", help="only these architectures (repeatable)"),
    checks: list[str] = typer.Option(None, "--checks", "-c", help="load,forward,generate,train,compile | all"),
    jobs: int = typer.Option(None, "--jobs", "-j", min=0, help="worker processes (default: cores; 0 = in-process)"),
    json_path: Path = typer.Option(None, "--json", help="write the versioned JSON report here"),
    store: bool = typer.Option(True, "--store/--no-store", help="persist results to the database"),
    trigger: str = typer.Option("manual", "--trigger", help="manual, nightly or submission (baselines follow it)"),
    broker: bool = typer.Option(False, "--broker", help="run on the Celery cluster at COMPAT_BROKER_URL, follow it"),
    baseline: str = typer.Option(None, "--baseline", help="diff against: last-nightly, last-<trigger>, last, run id"),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="exit 1 on a regression vs --baseline"),
) -> None:
    """Run the compatibility sweep and print the coverage table."""
    _check_distributed_options(trigger, broker, baseline, fail_on_regression, store)
    from worker.catalog.catalog import CatalogError, load_catalog
    from worker.judge.reporting import coverage_table
    from worker.orchestration.sweep import run_sweep

    settings = get_settings()
    wanted_checks = parse_checks(checks)
    dev = _device(device or settings.device)
    src = source or settings.catalog_source
    if src not in SOURCES:
        raise fail(f"unknown source {src!r}; valid sources: {', '.join(SOURCES)}")
    try:
        catalog = load_catalog(src, None if arch else limit)
    except CatalogError as exc:
        raise fail(str(exc)) from None
    entries = catalog.entries
    if arch:
        known = {e.name: e for e in entries}
        unknown = [a for a in arch if a not in known]
        if unknown:
            raise fail(f"unknown architecture {unknown[0]!r}; valid architectures: {', '.join(sorted(known))}")
        entries = [known[a] for a in arch][: limit or None]
    n_jobs = settings.jobs if jobs is None else jobs
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"), console=console,
                  transient=False) as bar:
        task = bar.add_task(f"sweep {dev.name}", total=len(entries), last="")

        def progress(entry, recs: list[ResultRecord]) -> None:  # noqa: ANN001
            bad = [f"{r.check}:{r.status}" for r in recs if r.status != Status.PASS]
            bar.update(task, advance=1, last=f"{entry.name} {'ok' if not bad else ' '.join(bad)}"[:60])

        if broker:
            report = _broker_sweep(entries, dev.name, wanted_checks, trigger, json_path, catalog,
                                   lambda done, _total: bar.update(task, completed=done))
        else:
            report = run_sweep(entries, dev, wanted_checks, jobs=n_jobs, trigger=trigger, store=_store(store),
                               json_path=json_path, progress=progress, catalog_source=catalog.source,
                               snapshot_id=catalog.snapshot_id)
    console.print(coverage_table(report.results, title=f"coverage on {dev.name} ({dev.info.description})"))
    if json_path:
        console.print(f"report: {json_path}")
    if baseline:
        raise typer.Exit(_regression_gate(report.run.id, dev.name, baseline, fail_on_regression))


def _check_distributed_options(trigger: str, broker: bool, baseline: str | None, gate: bool, store: bool) -> None:
    from compat.results import Trigger
    from worker.orchestration.nightly import parse_baseline

    if trigger not in {t.value for t in Trigger}:
        raise fail(f"unknown trigger {trigger!r}; valid triggers: {', '.join(t.value for t in Trigger)}")
    if broker and not get_settings().broker_url:
        raise fail("--broker needs COMPAT_BROKER_URL (e.g. redis://127.0.0.1:6379/0)")
    if gate and not baseline:
        raise fail("--fail-on-regression needs --baseline (e.g. --baseline last-nightly)")
    if (baseline or broker) and not store:
        raise fail("--baseline and --broker read results from the database: drop --no-store")
    if baseline:
        try:
            parse_baseline(baseline)
        except ValueError as exc:
            raise fail(str(exc)) from None


def _broker_sweep(entries, device: str, checks: list[Check], trigger: str, json_path: Path | None,  # noqa: ANN001
                  catalog, on_progress) -> Report:  # noqa: ANN001
    from compat.results import Trigger
    from worker.orchestration.executors import broker_sweep
    from worker.orchestration.sweep import write_report

    outcome, report = broker_sweep(entries, device, checks, trigger=Trigger(trigger), store=_store(True),
                                   catalog_source=catalog.source, snapshot_id=catalog.snapshot_id,
                                   on_progress=on_progress)
    if outcome.state != "complete":
        console.print(f"run {outcome.run_id} is {outcome.state}: some architectures never reported back")
    if json_path:
        write_report(report, json_path)
    return report


def _regression_gate(run_id: str, device: str, baseline: str, fail_on_regression: bool) -> int:
    from worker.orchestration.nightly import format_diff, regression_gate

    diff, code = regression_gate(_store(True), run_id, device, baseline, fail_on_regression)
    console.print(format_diff(diff), highlight=False, markup=False)
    return code


def _load_results(json_path: Path | None, device: str | None, architecture: str | None = None,
                  ) -> list[ResultRecord]:
    if json_path is not None:
        recs = _read_report(json_path).results
        return [r for r in recs if (architecture is None or r.architecture == architecture)
                and (device is None or r.device == device)]
    st = _store(True)
    if architecture is not None:
        return st.latest_results(architecture, device)
    run_id = st.last_run_id(device or get_settings().device)
    return st.run_results(run_id) if run_id else []


@app.command()
def show(
    architecture: str = typer.Argument(..., help="architecture class name, e.g. LlamaForCausalLM"),
    device: str = typer.Option(None, "--device", "-d", help="only this device"),
    json_path: Path = typer.Option(None, "--json", help="read from a JSON report instead of the database"),
    log: bool = typer.Option(False, "--log", help="also print the captured log"),
) -> None:
    """Show the latest results of one architecture."""
    from worker.catalog.catalog import registry_entries
    from worker.judge.reporting import results_table

    recs = _load_results(json_path, device, architecture)
    if not recs:
        known = sorted(e.name for e in registry_entries())
        if architecture not in known:
            raise fail(f"unknown architecture {architecture!r}; valid architectures: {', '.join(known)}")
        raise fail(f"no results for {architecture}{' on ' + device if device else ''}; run `compat sweep` first", 1)
    console.print(results_table(recs, title=architecture))
    for r in recs:
        if r.repro and r.status != Status.PASS:
            console.print(f"repro ({r.check}): {r.repro}", highlight=False)
    if log:
        for r in recs:
            if r.log:
                console.print(r.log, markup=False, highlight=False)
                break


@app.command()
def blockers(
    device: str = typer.Option(None, "--device", "-d", help="device of the run (default: settings device)"),
    json_path: Path = typer.Option(None, "--json", help="read from a JSON report instead of the database"),
    top: int = typer.Option(20, "--top", min=1, help="show the top N ops"),
) -> None:
    """Rank aten ops by how many architectures each one blocks."""
    from worker.judge.reporting import blockers as rank
    from worker.judge.reporting import blockers_table

    ranked = rank(_load_results(json_path, device))
    if not ranked:
        console.print("no blocking ops: nothing failed on an identifiable op")
        return
    console.print(blockers_table(ranked, top))
    for b in ranked[:3]:
        console.print(b.message, highlight=False)


@app.command()
def repro(
    architecture: str = typer.Argument(..., help="architecture class name"),
    device: str = typer.Option(None, "--device", "-d", help="device to reproduce on"),
    check: list[str] = typer.Option(None, "--check", "-c", help="check(s) to reproduce (default: the four)"),
    out: Path = typer.Option(None, "--out", "-o", help="write the script here instead of stdout"),
) -> None:
    """Print a standalone Python script reproducing ARCH on DEVICE with the sweep's tiny config and seed."""
    from worker.build.tiny_config import TinyConfigError, shrink
    from worker.catalog.catalog import load_catalog
    from worker.run.devices import _DEVICE_RE, KNOWN_DEVICES
    from worker.run.repro import repro_script

    settings = get_settings()
    dev_name = device or settings.device
    m = _DEVICE_RE.match(dev_name)
    if not m or m.group("type") not in KNOWN_DEVICES:  # no availability check: repro may target another machine
        raise fail(f"unknown device {dev_name!r}; valid devices: {', '.join(KNOWN_DEVICES)}")
    wanted = parse_checks(check)
    entries = {e.name: e for e in load_catalog(settings.catalog_source).entries}
    if architecture not in entries:
        raise fail(f"unknown architecture {architecture!r}; valid architectures: {', '.join(sorted(entries))}")
    try:
        config = shrink(entries[architecture]).to_dict()
    except TinyConfigError as exc:
        raise fail(f"cannot build a tiny {architecture}: {exc}", 1) from None
    backend = "neuron" if m.group("type") == "neuron" else "inductor"
    script = repro_script(architecture, dev_name, config, seed=settings.seed, checks=wanted,
                          compile_backend=backend)
    if out:
        out.write_text(script)
        console.print(f"wrote {out}")
    else:
        sys.stdout.write(script)


@catalog_app.command("refresh")
def catalog_refresh(
    limit: int = typer.Option(None, "--limit", min=1, help="models to list (default: settings hub_limit)"),
    out: Path = typer.Option(None, "--out", help="snapshot path (default: settings snapshot path)"),
    endpoint: str = typer.Option(None, "--endpoint", help="Hub endpoint (default: HF_ENDPOINT)"),
) -> None:
    """List the Hub's text-generation models and save the ranked snapshot file."""
    from worker.catalog.catalog import CatalogError, refresh_snapshot

    try:
        cat = refresh_snapshot(limit, out, endpoint=endpoint)
    except CatalogError as exc:
        raise fail(str(exc), 1) from None
    console.print(f"snapshot {cat.snapshot_id}: {len(cat.entries)} architectures")


@app.command("worker")
def worker_cmd(
    concurrency: int = typer.Option(None, "--concurrency", min=1, help="pool processes (default: cores)"),
    hostname: str = typer.Option(None, "--hostname", help="node name, e.g. w1@%h (default: celery@host)"),
    loglevel: str = typer.Option("INFO", "--loglevel"),
) -> None:
    """Start a Celery worker for distributed sweeps (broker: COMPAT_BROKER_URL)."""
    from worker.orchestration.celery_app import ConfigError, run_worker

    try:
        run_worker(concurrency, hostname, loglevel)
    except ConfigError as exc:
        raise fail(str(exc)) from None


@app.command("beat")
def beat_cmd(loglevel: str = typer.Option("INFO", "--loglevel")) -> None:
    """Start the scheduler that sends the nightly sweep at COMPAT_NIGHTLY_CRON (UTC; run exactly one)."""
    from worker.orchestration.celery_app import ConfigError, run_beat

    try:
        run_beat(loglevel)
    except (ConfigError, ValueError) as exc:
        raise fail(str(exc)) from None


# Service commands: thin wrappers over service.commands (imported lazily: no DB/uvicorn at CLI start).
db_app = typer.Typer(help="The results database.", no_args_is_help=True)
app.add_typer(db_app, name="db")
token_app = typer.Typer(help="API tokens for the service's write endpoints.", no_args_is_help=True)
app.add_typer(token_app, name="token")


@db_app.command("upgrade")
def db_upgrade_cmd() -> None:
    """Migrate the database at COMPAT_DATABASE_URL to the newest schema."""
    from service.commands import db_upgrade

    console.print(f"database at revision {db_upgrade()}")


@token_app.command("create")
def token_create_cmd(name: str = typer.Argument(..., help="who the token is for (unique)")) -> None:
    """Create a token and print it once (only its hash is stored)."""
    from service.commands import token_create

    try:
        print(token_create(name))
    except ValueError as exc:
        raise fail(str(exc)) from None


@app.command("serve")
def serve_cmd(host: str = typer.Option(None, "--host", help="default COMPAT_HOST"),
              port: int = typer.Option(None, "--port", min=1, max=65535, help="default COMPAT_PORT")) -> None:
    """Serve the REST API and the dashboard."""
    from service.commands import serve

    serve(host, port)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
