"""How a ``compat`` command ends: ``fail``, the one-line error on stderr with its exit code, and ``run``, which runs
a Typer program and turns a setting nothing can use into that one line.

Plain ``print``, no rich: ``compat lookup`` answers without importing rich, and a message is printed as written
(rich's markup would read ``[aten::sort (Int)]`` as a style tag).
"""

from __future__ import annotations

import sys

import typer

from compat.settings import SettingError


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one line to stderr and return the Exit to raise (bad input = 2)."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return typer.Exit(code)


def run(app: typer.Typer, args: list[str] | None = None, prog_name: str | None = None) -> None:
    """Run ``app`` on ``args`` (default: the command line); a ``SettingError`` (an unusable COMPAT_DATABASE_URL) is
    one line on stderr and exit code 2, not a traceback."""
    try:
        app(args=args, prog_name=prog_name)
    except SettingError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
