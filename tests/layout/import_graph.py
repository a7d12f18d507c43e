"""The project's function-local imports, read from the source with ``ast`` (nothing is imported), and their rule.

import-linter (``lint-imports``, ``[tool.importlinter]`` in pyproject.toml) holds the layers and forbids cycles; it
counts an import inside a function like any other and cannot ask why it is there. This module can:
``local_import_violations`` lists every function-local import that ``ALLOWED_LOCAL`` does not name or that carries
no comment saying why; ``tests/layout/test_import_contract.py`` runs it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Top-level packages of the project (bench/ and tests/ are scripts around it, not layers of it).
PACKAGES = ("compat", "neuron_backend", "worker", "service", "dashboards", "cli")

# Function-local imports allowed, by (module, function, imported module): each keeps an import out of a process
# that must stay light; none hides a cycle. The code carries the same reason in a comment at the import.
ALLOWED_LOCAL: dict[tuple[str, str, str], str] = {
    ("cli.lazy", "harness", "cli.commands"):
        "`compat --help` and bad input answer without importing torch and transformers",
    ("cli.lazy", "database", "service.commands"):
        "`compat --help` and bad input answer without importing SQLAlchemy and Alembic",
    ("cli.lazy", "web", "cli.serve"):
        "`compat --help` and bad input answer without importing FastAPI and uvicorn",
    ("cli.lazy", "cluster", "worker.orchestration.celery_app"):
        "`compat --help` and bad input answer without importing Celery",
    ("cli.lazy", "calibration", "cli.calibrate"):
        "`compat --help` and bad input answer without importing torch, transformers and the simulated device",
    ("cli.lazy", "reads", "cli.reads"):
        "`compat show` and `compat blockers` read the store without torch; `compat --help` without SQLAlchemy",
    ("cli.lazy", "lookup", "cli.lookup"):
        "`compat lookup` answers from the store in under a second: no torch and none of the other reads' modules",
    ("cli.entry", "main", "cli.app"):
        "`compat lookup` starts without the other commands' Typer tree and its imports (validate, help, nightly)",
    ("cli.lazy", "stored", "cli.stored"):
        "bad input answers without SQLAlchemy unless a run id or an uncatalogued architecture is looked up",
    ("worker.orchestration.tasks", "_warm_pool_process", "worker.run.runner.runner"):
        "the Celery worker's main process forks its pool processes: torch is imported in each of those, not in it",
    ("worker.orchestration.tasks", "nightly_sweep_task", "worker.orchestration.planning"):
        "the Celery worker's main process stays free of torch: the nightly is planned in a pool process",
    ("worker.orchestration.tasks", "run_submission_task", "worker.orchestration.submissions"):
        "the Celery worker's main process stays free of the store and torch: a submission runs in a pool process",
    ("worker.orchestration.tasks", "store_for", "service.store"):
        "the Celery worker's main process only supervises: it starts (is ready) without SQLAlchemy and Alembic",
    ("worker.orchestration.tasks", "_forget_inherited_connections", "service.db"):
        "the Celery worker's main process only supervises: it starts (is ready) without SQLAlchemy and Alembic",
    ("worker.orchestration.submissions", "run_submission", "worker.orchestration.sweep"):
        "the API process stays free of torch until a submission actually runs in it",
    ("worker.orchestration.submissions", "run_submission", "worker.run.process.devices"):
        "the API process stays free of torch until a submission's device is resolved in it",
    ("worker.run.process.pool", "warm_imports", "torch"):
        "the pool's warm-up: a spawned worker imports torch here, once, before its first task",
    ("worker.run.process.pool", "warm_imports", "transformers"):
        "the pool's warm-up: a spawned worker imports transformers here, once, before its first task",
    ("service.validation", "check_config", "torch"):
        "the API process imports torch only when a submitted config is measured on the meta device",
    ("service.validation", "check_config", "transformers"):
        "the API process imports transformers only when a submitted config is measured on the meta device",
}
# Packages whose function-local imports are checked (neuron_backend has its own owners and rules).
LOCAL_IMPORT_PACKAGES = ("compat", "worker", "service", "dashboards", "cli")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name of the importing file
    imported: str  # dotted module imported (for ``from m import x``: ``m.x`` when that is a module, else ``m``)
    line: int
    function: str | None  # innermost enclosing function, None at module level
    type_checking: bool  # under ``if TYPE_CHECKING:`` (never executed)
    commented: bool  # a ``#`` comment on the import's line or in the comment/import lines right above it


def module_files(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``packages`` under ``root``."""
    out: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    if node.level - 1 >= len(base):
        return ""  # beyond the top-level package: Python refuses it, and it names nothing of ours
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_in(name: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    """Every import statement of one file, with where it sits."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    is_package = path.name == "__init__.py"

    def commented(lineno: int) -> bool:
        if "#" in lines[lineno - 1]:
            return True
        i = lineno - 1
        while i > 0 and lines[i - 1].strip().startswith(("#", "from ", "import ")):
            if lines[i - 1].strip().startswith("#"):
                return True
            i -= 1
        return False

    def visit(node: ast.AST, function: str | None, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(child, child.name, type_checking)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.body:
                    yield from visit(ast.Module(body=[sub], type_ignores=[]), function, True)
                for sub in child.orelse:
                    yield from visit(ast.Module(body=[sub], type_ignores=[]), function, type_checking)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(name, alias.name, child.lineno, function, type_checking, commented(child.lineno))
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(name, is_package, child)
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    yield Import(name, full if full in modules else base, child.lineno, function, type_checking,
                                 commented(child.lineno))
            else:
                yield from visit(child, function, type_checking)

    yield from visit(ast.parse(source, filename=str(path)), None, False)


def all_imports(root: Path, packages: Iterable[str] = PACKAGES) -> list[Import]:
    modules = module_files(root, packages)
    return [imp for name, path in modules.items() for imp in imports_in(name, path, modules)]


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def local_import_violations(imports: Iterable[Import], allowed: dict[tuple[str, str, str], str] = ALLOWED_LOCAL,
                            packages: Iterable[str] = LOCAL_IMPORT_PACKAGES) -> list[str]:
    """Function-local imports that the allow-list does not name, or that carry no comment saying why."""
    out = []
    pkgs = tuple(packages)
    for imp in imports:
        if imp.function is None or not any(_under(imp.importer, p) for p in pkgs):
            continue
        key = (imp.importer, imp.function, imp.imported)
        if key not in allowed:
            out.append(f"{imp.importer}:{imp.line} imports {imp.imported} inside {imp.function}(): import it at "
                       f"module level (a cycle is fixed by moving code, not by hiding the import)")
        elif not imp.commented:
            out.append(f"{imp.importer}:{imp.line} imports {imp.imported} inside {imp.function}() without a "
                       f"comment saying why")
    return out


def stale_allowances(imports: Iterable[Import], allowed: dict[tuple[str, str, str], str] = ALLOWED_LOCAL
                     ) -> list[tuple[str, str, str]]:
    """Allow-list entries that no longer match an import (the list must not outgrow the code)."""
    present = {(i.importer, i.function, i.imported) for i in imports if i.function is not None}
    return sorted(set(allowed) - present)
