"""The ``compat`` program (pyproject's entry point): ``compat lookup ...`` runs the lookup's own small command line
(``cli.lookup_cli``), so a lookup starts without importing every other command's modules; the rest runs ``cli.app``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

# Before pydantic builds its first validator (compat.settings, imported below): pydantic would first scan every
# installed distribution's entry points for its plugins (~50 ms of a lookup's start); this project uses none.
# pydantic 2.13.4, pydantic/plugin/_loader.py get_plugins(): PYDANTIC_DISABLE_PLUGINS='__all__' returns before the scan.
# setdefault: a PYDANTIC_DISABLE_PLUGINS set by the user wins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from cli import exits, lookup_cli  # noqa: E402 - after the setting above
from worker.run.process.quick_exit import exit_now as _exit_now  # noqa: E402


def main() -> None:
    if sys.argv[1:2] == ["lookup"]:
        _exit_now(_code_of(lambda: exits.run(lookup_cli.standalone(), sys.argv[2:], "compat lookup")))
    # Imported for every other command: `compat lookup` starts without typer's full command tree and its imports.
    from cli import app

    _exit_now(_code_of(lambda: exits.run(app.app)))


def _code_of(run: Callable[[], None]) -> int:
    """Run a command line and return its exit code (SystemExit's code as the interpreter would)."""
    try:
        run()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    main()
