"""The operator's commands of ``compat``: cluster processes, stored runs, the database, tokens, the cache, the server.

Each is a Typer function or sub-app that ``cli.app`` attaches; its work is imported through ``cli.lazy`` when it runs.
"""

from __future__ import annotations

import typer

from cli import lazy, validate
from cli.console import console, fail
from compat.settings import get_settings

# rich_markup_mode=None: Click's plain help, whose option names keep their own column and are never cut with "…"
# at 80 columns (rich's boxed help cut --fail-on-regression and NEURON_CPU_FALLBACK).
PLAIN = {"rich_markup_mode": None}

runs_app = typer.Typer(help="Stored runs.", no_args_is_help=True, **PLAIN)
db_app = typer.Typer(help="The results database.", no_args_is_help=True, **PLAIN)
token_app = typer.Typer(help="API tokens for the service's write endpoints.", no_args_is_help=True, **PLAIN)
cache_app = typer.Typer(help="The CPU reference cache and the tiny checkpoints kept beside it "
                             "(COMPAT_REFERENCE_CACHE_DIR; off: COMPAT_REFERENCE_CACHE=0).",
                        no_args_is_help=True, **PLAIN)


def worker_cmd(
    concurrency: int = typer.Option(None, "--concurrency", min=1, help="pool processes (default: cores)"),
    hostname: str = typer.Option(None, "--hostname", help="node name, e.g. w1@%h (default: celery@host)"),
    loglevel: str = typer.Option("INFO", "--loglevel"),
) -> None:
    """Start a Celery worker for distributed sweeps (broker: COMPAT_BROKER_URL)."""
    cluster = lazy.cluster()
    try:
        cluster.run_worker(concurrency, hostname, loglevel)
    except cluster.ConfigError as exc:
        raise fail(str(exc)) from None


def beat_cmd(loglevel: str = typer.Option("INFO", "--loglevel")) -> None:
    """Start the scheduler that sends the nightly sweep at COMPAT_NIGHTLY_CRON (UTC; run exactly one)."""
    cluster = lazy.cluster()
    try:
        cluster.run_beat(loglevel)
    except (cluster.ConfigError, ValueError) as exc:
        raise fail(str(exc)) from None


@runs_app.command("reap")
def runs_reap_cmd() -> None:
    """Mark runs whose owner process died (this host) or went silent as interrupted."""
    reaped = lazy.database().runs_reap(get_settings().database_url)
    for run_id, why in reaped:
        console.print(f"run {run_id} interrupted: {why}; resume: compat sweep --resume {run_id}", highlight=False)
    if not reaped:
        console.print("no run lost its owner")


@runs_app.command("list")
def runs_list_cmd(
    device: str = typer.Option(None, "--device", "-d", help="only this device's runs (a name, or an identity: "
                                                           "'neuron (trn3)')"),
    limit: int = typer.Option(20, "--limit", min=1, max=500, help="newest N runs"),
    kind: str = typer.Option("sweep", "--kind", help="sweep (the catalog), submission (one submitted config) or all"),
) -> None:
    """List stored runs, newest first: id, device identity, trigger, state, scope, supported / total, results,
    age."""
    device = validate.stored_device(device) if device else None
    if kind not in ("sweep", "submission", "all"):
        raise fail(f"--kind {kind!r}: use sweep, submission or all")
    lazy.reads().runs_list(device=device, limit=limit, kind=kind)


@cache_app.command("info")
def cache_info_cmd() -> None:
    """The cache's folder, entries and size (CPU references, and the tiny checkpoints they come from)."""
    lazy.harness().cache_info()


@cache_app.command("clear")
def cache_clear_cmd() -> None:
    """Delete every cached CPU reference and tiny checkpoint (the next sweep builds and computes them again)."""
    lazy.harness().cache_clear()


@db_app.command("upgrade")
def db_upgrade_cmd() -> None:
    """Migrate the database at COMPAT_DATABASE_URL to the newest schema."""
    console.print(f"database at revision {lazy.database().db_upgrade()}")


@token_app.command("create")
def token_create_cmd(name: str = typer.Argument(..., help="who the token is for (unique)")) -> None:
    """Create a token and print it once (only its hash is stored)."""
    try:
        print(lazy.database().token_create(name))
    except ValueError as exc:
        raise fail(str(exc)) from None


def serve_cmd(host: str = typer.Option(None, "--host", help="default COMPAT_HOST"),
              port: int = typer.Option(None, "--port", min=1, max=65535, help="default COMPAT_PORT"),
              check_port: bool = typer.Option(False, "--check-port", help="only check that the port is free, exit"),
              from_make: bool = typer.Option(False, "--from-make", hidden=True,
                                             help="a busy port names make's PORT=N (the Makefile passes it)")) -> None:
    """Serve the REST API and the dashboard."""
    web = lazy.web()
    hint = web.MAKE_PORT_HINT if from_make else web.PORT_HINT
    if check_port:
        web.check_port(host, port, hint)
        return
    web.serve(host, port, hint)
