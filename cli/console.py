"""The CLI's terminal: the rich console every command prints to (and ``fail``, from ``cli.exits``).

Light on purpose: the CLI imports it before any command's work (torch, the store) is loaded.
"""

from __future__ import annotations

from rich.console import Console

from cli.exits import fail  # noqa: F401 - the commands import it with the console

console = Console()
if not console.is_terminal:
    # Piped or in CI, rich measures whatever terminal stdin or stderr belongs to (or COLUMNS), often a narrow one:
    # summaries and tables printed to a log or a file fill at least 80 columns.
    console.width = max(80, console.width)
