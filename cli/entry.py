"""The ``compat`` program (pyproject's entry point): ``compat lookup ...`` runs the lookup's own small command line
(``cli.lookup_cli``), so a lookup starts without importing every other command's modules; the rest runs ``cli.app``.
"""

from __future__ import annotations

import os
import sys

# Before pydantic builds its first validator (compat.settings, imported below): pydantic would first scan every
# installed distribution's entry points for its plugins (~50 ms of a lookup's start); this project uses none.
# pydantic 2.13.4, pydantic/plugin/_loader.py get_plugins(): PYDANTIC_DISABLE_PLUGINS='__all__' returns before the scan.
# setdefault: a PYDANTIC_DISABLE_PLUGINS set by the user wins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from cli import exits, lookup_cli  # noqa: E402 - after the setting above


def main() -> None:
    if sys.argv[1:2] == ["lookup"]:
        _exit_now(_lookup_code())
    # Imported for every other command: `compat lookup` starts without typer's full command tree and its imports.
    from cli import app

    exits.run(app.app)


def _lookup_code() -> int:
    """Run the lookup's command line and return its exit code (SystemExit's code as the interpreter would)."""
    try:
        exits.run(lookup_cli.standalone(), sys.argv[2:], "compat lookup")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def _exit_now(code: int) -> None:
    """End a lookup without the interpreter's teardown: freeing SQLAlchemy's and pydantic's modules at exit took
    ~0.25 s of a ~1.1 s lookup (python -c "import ...": 0.98-1.15 s, 0.78-0.86 s with os._exit; 2026-12-07, idle
    box). Nothing is left to finish: the lookup only reads, its session is closed, and the output is flushed here."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a closed pipe (compat lookup ... | head): nothing more to write
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
