"""``compat lookup``'s command line: its options and where each form goes (the store; the Hub with ``--hub``).

Apart from ``cli.app`` so that ``compat lookup`` starts without the other commands' imports: ``cli.entry`` runs
``standalone()`` for it, and ``cli.app`` registers the same function, so ``compat --help`` lists it.
"""

from __future__ import annotations

import typer

from cli import lazy
from cli.exits import fail


def lookup(
    model_id: str = typer.Argument(None, help="ORG/NAME, as on the Hub"),
    as_json: bool = typer.Option(False, "--json", help="the API's JSON answer"),
    device: str = typer.Option(None, "--device", "-d", help="the device judged on (default: the newest)"),
    list_all: bool = typer.Option(False, "--list", help="the per-model headline and every stored model"),
    hub: bool = typer.Option(False, "--hub", help="a model not stored: read its config.json from the Hub "
                             "(HF_ENDPOINT): its architecture's verdict, what differs, a plan"),
) -> None:
    """A model's verdict, checks and real-size plan, from the store (after `compat sweep --models`)."""
    if hub and model_id:
        lazy.harness().model_commands.lookup_hub(model_id=model_id, device=device, as_json=as_json, endpoint=None)
        return
    if list_all:
        lazy.lookup().list_models(device)
        return
    if not model_id:
        raise fail("name a model (ORG/NAME), or --list")
    lazy.lookup().lookup(model_id, device=device, as_json=as_json)


def standalone() -> typer.Typer:
    """``lookup`` as a program of its own: what ``compat lookup ARGS`` runs (``cli.entry``)."""
    app = typer.Typer(add_completion=False, rich_markup_mode=None)
    app.command()(lookup)
    return app
