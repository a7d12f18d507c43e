"""The ``compat`` command line (Typer): every command's options, help and input checks, then its work.

Bad input is one line on stderr naming the valid choices, exit code 2. A command's work lives in ``commands``
(torch, the store), ``service.commands`` (SQLAlchemy), ``serve`` (FastAPI) or ``celery_app`` (Celery), imported only
when it runs (``cli.lazy``), so ``compat --help`` and option errors answer at once. The operator's commands (worker,
beat, runs, db, token, cache, serve) are defined in ``cli.admin`` and attached here.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from cli import admin, exits, lazy, lookup_cli, validate
from cli.console import fail
from cli.help_text import SweepCommand, checks_help
from compat.results import Check, Trigger
from compat.settings import get_settings
from worker.orchestration.nightly import parse_baseline
from worker.orchestration.warm_pool import sweep_pool

PLAIN = admin.PLAIN  # Click's plain help: no option name cut at 80 columns (admin.PLAIN says why)
app = typer.Typer(help="Which Hugging Face causal-LM architectures run correctly on a device, and why not.",
                  no_args_is_help=True, add_completion=False, **PLAIN)
catalog_app = typer.Typer(help="The architecture catalog.", no_args_is_help=True, **PLAIN)
app.add_typer(catalog_app, name="catalog")


def parse_checks(values: list[str] | None) -> list[Check]:
    """``--checks load,forward --checks compile`` -> checks; ``all`` = every check (compat.results.ALL_CHECKS), ``default`` = DEFAULT_CHECKS."""
    return validate.checks(values)


@app.command(cls=SweepCommand)
def sweep(
    device: str = typer.Option(None, "--device", "-d", metavar="DEVICE",
                               help="neuron (default), cpu, cuda, mps, xpu[:N]"),
    source: str = typer.Option(None, "--source", metavar="SOURCE", help="catalog source: auto, hub, snapshot, registry"),
    limit: int = typer.Option(None, "--limit", min=1, metavar="N", help="first N architectures of the catalog"),
    arch: list[str] = typer.Option(None, "--arch", "-a", metavar="ARCH", help="only these architectures (repeatable)"),
    checks: list[str] = typer.Option(None, "--checks", "-c", metavar="CHECKS", help=checks_help()),
    jobs: int = typer.Option(None, "--jobs", "-j", min=0, metavar="N",
                             help="worker processes (default: cores; 0 = in-process)"),
    json_path: Path = typer.Option(None, "--json", metavar="FILE", help="write the versioned JSON report here"),
    store: bool = typer.Option(True, "--store/--no-store", help="persist results to the database"),
    trigger: str = typer.Option("manual", "--trigger", metavar="TRIGGER",
                                help="manual, nightly or submission (baselines follow it)"),
    broker: bool = typer.Option(False, "--broker", help="run on the Celery cluster at COMPAT_BROKER_URL, follow it"),
    baseline: str = typer.Option(None, "--baseline", metavar="RUN",
                                 help="diff against: last-nightly, last-<trigger>, last, run id"),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                            help="exit 1 on a regression vs --baseline, or a run not complete"),
    resume: str = typer.Option(None, "--resume", metavar="RUN",
                               help="finish this interrupted run (its device, catalog, checks; ids: compat runs list)"),
    strict: bool = typer.Option(False, "--strict", help="no CPU fallback on neuron (NEURON_CPU_FALLBACK=0)"),
    switch: list[str] = typer.Option(None, "--switch", metavar="ID=OPTION", help="set a decision of the simulated "
                                     "neuron device (repeatable; or NEURON_SWITCHES; listed below)"),
    measure_decisions: bool = typer.Option(True, "--decisions/--no-decisions",
                                           help="measure how many architectures each device decision moves "
                                                "(re-runs the affected ones; the headline's range)"),
    measure_chains: bool = typer.Option(True, "--chains/--no-chains",
                                        help="measure blocker chains: re-run each architecture failing at an op "
                                             "with it on the CPU fallback (simulated neuron; compat blockers)"),
    models: bool = typer.Option(False, "--models", help="judge each model of the shipped corpus with its own "
                                "config (one run per distinct tiny config) and plan it at real size"),
    model: list[str] = typer.Option(None, "--model", help="with --models: only these model ids (repeatable)"),
    tokens: int = typer.Option(4096, "--tokens", min=1, help="with --models: context the KV-cache plan holds"),
    batch: int = typer.Option(1, "--batch", min=1, help="with --models: sequences the KV-cache plan holds"),
) -> None:
    """Run the compatibility sweep and print the coverage table."""
    _check_distributed_options(trigger, broker, baseline, fail_on_regression, store)
    if strict:
        if broker:
            raise fail("--strict sets NEURON_CPU_FALLBACK=0 for this machine's workers: set it on the cluster's "
                       "workers instead of --broker --strict")
        # Read by neuron_backend when it loads, in this process and in every pool worker it starts (they inherit it).
        os.environ["NEURON_CPU_FALLBACK"] = "0"
    if models or model:
        if arch or limit or source or broker or baseline or resume or switch or json_path:
            raise fail("--models sweeps the corpus's models: drop --arch/--limit/--source/--broker/--baseline/"
                       "--resume/--switch/--json")
        dev = validate.harness_device(device)
        n_jobs = get_settings().jobs if jobs is None else jobs
        lazy.harness().model_commands.run(device=dev, models=model, checks=parse_checks(checks), jobs=n_jobs,
                                      store=store, tokens=tokens, batch=batch)
        return
    settings = get_settings()
    if resume is not None:
        if arch or limit or checks or source or device or broker:
            raise fail("--resume takes the run's own device, catalog and checks: drop --device/--source/--limit/"
                       "--arch/--checks/--broker")
        lazy.stored().run_id(resume)
    # Every name is checked here, before the harness (torch) loads: a typo answers at once.
    dev = validate.harness_device(device)
    chosen = validate.switches(switch or [], dev)
    if chosen and broker:
        raise fail("--switch sets NEURON_SWITCHES for this machine's workers: set it on the cluster's workers")
    wanted_checks = parse_checks(checks)
    src = validate.source(source or settings.catalog_source)
    validate.architectures(arch or [], src)
    baseline_run = parse_baseline(baseline).run_id if baseline else None
    if baseline_run is not None:
        lazy.stored().run_id(baseline_run)
    n_jobs = settings.jobs if jobs is None else jobs
    # The workers start now, before the harness (torch, transformers) is imported here: their warm-up overlaps it.
    # Not with --switch (its NEURON_SWITCHES is set for the workers later) nor when nothing runs in a local pool.
    early = None
    if not (broker or resume or chosen) and n_jobs > 0:
        validate.memory_limit()
        early = sweep_pool(dev, min(n_jobs, len(arch) if arch else limit or n_jobs)).start()
    try:
        code = lazy.harness().sweep(device=dev, source=src, limit=limit, arch=arch,
                                    checks=wanted_checks, jobs=n_jobs, json_path=json_path,
                                    store=store, trigger=trigger, broker=broker, baseline=baseline,
                                    fail_on_regression=fail_on_regression, resume=resume,
                                    measure_decisions=measure_decisions, switches=chosen,
                                    measure_chains=measure_chains, pool=early)
    finally:
        if early is not None:
            early.close()  # the harness closes it when it ran; not when it stopped before (a bad catalog)
    if baseline:
        raise typer.Exit(code)


def _check_distributed_options(trigger: str, broker: bool, baseline: str | None, gate: bool, store: bool) -> None:
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


@app.command()
def show(
    architecture: str = typer.Argument(..., help="architecture class name, e.g. LlamaForCausalLM"),
    device: str = typer.Option(None, "--device", "-d", help="only this device, or identity: 'neuron (trn3)'"),
    json_path: Path = typer.Option(None, "--json", help="read from a JSON report instead of the database"),
    log: bool = typer.Option(False, "--log", help="also print the captured log"),
    full: bool = typer.Option(False, "--full", help="print every error whole (default: cut at a sentence end)"),
) -> None:
    """Show the latest results of one architecture."""
    device = validate.stored_device(device) if device else None
    lazy.reads().show(architecture=architecture, device=device, json_path=json_path, log=log, full=full)


app.command("lookup")(lookup_cli.lookup)


@app.command()
def publish(
    repo: str = typer.Option(..., "--repo", help="the Hub dataset, ORG/NAME"),
    endpoint: str = typer.Option(None, "--endpoint", help="Hub endpoint (default: HF_ENDPOINT)"),
    token: str = typer.Option(None, "--token", envvar="HF_TOKEN", help="a Hub write token (default: HF_TOKEN)"),
    device: str = typer.Option(None, "--device", "-d", help="the device's tables (default: the newest)"),
) -> None:
    """Publish the per-model and per-architecture tables as a Hub dataset (parquet and a dataset card)."""
    lazy.harness().publish_commands.publish(repo=repo, endpoint=endpoint, token=token, device=device)


@app.command()
def blockers(
    device: str = typer.Option(None, "--device", "-d", help="device or identity, e.g. 'neuron (trn3)' (default: "
                                                           "settings device, its default profile)"),
    json_path: Path = typer.Option(None, "--json", help="read from a JSON report instead of the database"),
    top: int = typer.Option(20, "--top", min=1, help="show the top N ops"),
    run_id: str = typer.Option(None, "--run", help="this stored run instead of the device's headline run"),
) -> None:
    """What implementing ops unlocks: each blocked architecture's chain of blocking ops, ops ranked by it."""
    device = validate.stored_device(device) if device else None
    if run_id is not None:
        lazy.stored().run_id(run_id)
    lazy.reads().blockers(device=device, json_path=json_path, top=top, run_id=run_id)


@app.command()
def whatif(
    switch: list[str] = typer.Option(None, "--switch", help="a decision at another option, ID=OPTION (repeatable); "
                                     "none: list what the run measured"),
    device: str = typer.Option("neuron", "--device", "-d", help="device whose headline run to re-judge"),
    run_id: str = typer.Option(None, "--run", help="this stored run instead of the device's headline run"),
    json_path: Path = typer.Option(None, "--json", help="read from a JSON report instead of the database"),
) -> None:
    """Re-judge a run under other options of the device's decisions, from what the run measured (no new sweep)."""
    dev = validate.device(device)
    chosen = validate.switches(switch or [], dev)
    code = lazy.harness().whatif(chosen=chosen, device=dev, run_id=run_id, json_path=json_path)
    raise typer.Exit(code)


@app.command()
def repro(
    architecture: str = typer.Argument(None, metavar="ARCH", help="architecture class name (or --submission N)"),
    device: str = typer.Option(None, "--device", "-d", help="device to reproduce on"),
    check: list[str] = typer.Option(None, "--check", "-c",
                                    help="check(s) to reproduce (default: the four); fsdp/tp: a torchrun script"),
    out: Path = typer.Option(None, "--out", "-o", help="write the script here instead of stdout"),
    submission: int = typer.Option(None, "--submission", min=1,
                                   help="a submission's id: its submitted config instead of a catalog architecture"),
) -> None:
    """Print a standalone Python script reproducing ARCH (or --submission N's config) on DEVICE with the sweep's tiny
    config and seed."""
    if (architecture is None) == (submission is None):
        raise fail("give ARCH or --submission N, not both" if submission else "give ARCH (e.g. LlamaForCausalLM) or "
                   "--submission N")
    device = validate.device(device) if device else validate.device(get_settings().device, origin="COMPAT_DEVICE")
    wanted = parse_checks(check)
    if architecture is not None:
        validate.architectures([architecture], get_settings().catalog_source)
    lazy.harness().repro_commands.repro(architecture=architecture, device=device, checks=wanted, out=out,
                                        submission=submission)


@catalog_app.command("refresh")
def catalog_refresh(
    limit: int = typer.Option(None, "--limit", min=1, help="models to list (default: settings hub_limit)"),
    out: Path = typer.Option(None, "--out", help="snapshot path (default: settings snapshot path)"),
    endpoint: str = typer.Option(None, "--endpoint", help="Hub endpoint (default: HF_ENDPOINT)"),
    models: bool = typer.Option(False, "--models", help="also the per-model snapshot: transformers models by "
                                "downloads and by trending, each config read at its commit sha"),
    models_out: Path = typer.Option(None, "--models-out", help="per-model snapshot path (default: beside the "
                                    "snapshot, models-snapshot.json)"),
) -> None:
    """List the Hub's text-generation models and save the ranked snapshot file."""
    if models:
        lazy.harness().model_commands.refresh(limit=limit, out=out, models_out=models_out, endpoint=endpoint)
        return
    lazy.harness().catalog_refresh(limit=limit, out=out, endpoint=endpoint)


@catalog_app.command("list")
def catalog_list(
    source: str = typer.Option(None, "--source", help="auto (default: settings), snapshot or registry"),
) -> None:
    """Print the catalog's architecture names, one a line, rank 1 first (what --arch and show accept)."""
    src = validate.source(source or get_settings().catalog_source)
    if src == "hub":
        raise fail("the hub source is a live listing: run `compat catalog refresh`, then list --source snapshot")
    names = validate.known_architectures(src)
    if names is None:
        raise fail(f"cannot read the {src} catalog (run `compat catalog refresh`, or use --source registry)", 1)
    print("\n".join(names))


app.command("worker")(admin.worker_cmd)
app.command("beat")(admin.beat_cmd)
app.add_typer(admin.runs_app, name="runs")
app.add_typer(admin.db_app, name="db")
app.add_typer(admin.token_app, name="token")
app.add_typer(admin.cache_app, name="cache")
app.command("serve")(admin.serve_cmd)


@app.command("calibrate")
def calibrate_cmd(
    device: str = typer.Option("neuron", "--device", "-d", help="the device compared with real Trainium: neuron"),
    limit: int = typer.Option(None, "--limit", min=1, help="first N observed architectures (by name)"),
    arch: list[str] = typer.Option(None, "--arch", "-a", help="only these observed classes (repeatable)"),
    json_path: Path = typer.Option(None, "--json", help="write the comparison and the records here"),
    jobs: int = typer.Option(None, "--jobs", "-j", min=0, help="worker processes (default: cores; 0 = in-process)"),
    compile_check: bool = typer.Option(False, "--compile", help="also run compile and compare compiled observations"),
) -> None:
    """Compare the simulated device with what real Trainium hardware was seen to do: each observed architecture
    (neuron_backend/hardware/profile_sources/observations.json) runs as a tiny model; one row each, and the agreement."""
    dev = validate.harness_device(device)
    if not dev.startswith("neuron"):
        raise fail(f"calibrate compares the neuron device with real Trainium observations; --device {dev} is not "
                   "neuron")
    validate.observed(arch or [])
    jobs = get_settings().jobs if jobs is None else jobs
    lazy.calibration().calibrate(device=dev, limit=limit, arch=arch, json_path=json_path, jobs=jobs,
                             compile_check=compile_check)


def main() -> None:
    exits.run(app)


if __name__ == "__main__":
    main()
