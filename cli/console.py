"""The CLI's terminal: the console every command prints to, and ``fail``, the one-line error with its exit code.

Light on purpose: the CLI imports it before any command's work (torch, the store) is loaded.
"""

from __future__ import annotations

import typer
from rich.console import Console

console = Console()
if not console.is_terminal:
    # Piped or in CI, rich measures whatever terminal stdin or stderr belongs to (or COLUMNS), often a narrow one:
    # summaries and tables printed to a log or a file fill at least 80 columns.
    console.width = max(80, console.width)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one line to stderr and return the Exit to raise (bad input = 2)."""
    Console(stderr=True).print(f"error: {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)
