"""What ``compat sweep --help`` says beyond its options: the default checks and the simulated device's decision
switches, read when the help is printed (the profile's JSON, no torch) so the list is never a stale copy.

Plain Click help (the app sets ``rich_markup_mode=None``): option names in their own column, never cut at 80 columns.
"""

from __future__ import annotations

import click
from typer.core import TyperCommand

from cli import validate
from compat.results import ALL_CHECKS, DEFAULT_CHECKS


def checks_help() -> str:
    """The ``--checks`` help: every check, the default ones named."""
    return (f"comma-separated checks, repeatable: {', '.join(str(c) for c in ALL_CHECKS)}; all = every one "
            f"[default: {', '.join(str(c) for c in DEFAULT_CHECKS)}]")


class SweepCommand(TyperCommand):
    """``compat sweep``'s help with two sections after the options: default checks, decision switches."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Default checks (--checks)"):
            formatter.write_text(f"{', '.join(str(c) for c in DEFAULT_CHECKS)} (a supported architecture passes "
                                 "load, forward and generate); --checks all adds "
                                 f"{', '.join(str(c) for c in ALL_CHECKS if c not in DEFAULT_CHECKS)}")
        table = validate.switch_table()
        if table:
            with formatter.section("Decision switches (--switch ID=OPTION; NEURON_SWITCHES=ID=OPTION,...)"):
                formatter.write_dl([(sw["id"], f"{' | '.join(_options(sw))}: {sw.get('subject', '')}".replace("`", ""))
                                    for sw in table])
        super().format_epilog(ctx, formatter)


def _options(switch: dict) -> list[str]:
    default = switch.get("default")
    return [f"{o} (default)" if o == default else str(o) for o in switch.get("options", {})]
