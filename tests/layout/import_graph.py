"""The project's import graph, read from the source with ``ast`` (nothing is imported), and the layer contract on it.

``violations(root)`` lists every import that breaks a rule of ``RULES``, every import cycle between modules, and
every function-local import that ``ALLOWED_LOCAL`` does not name; ``tests/layout/test_import_contract.py`` runs it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Top-level packages of the project (bench/ and tests/ are scripts around it, not layers of it).
PACKAGES = ("compat", "neuron_backend", "worker", "service", "dashboards")
STAGES = ("worker.catalog", "worker.build", "worker.run", "worker.judge")
ORCHESTRATION = "worker.orchestration"


@dataclass(frozen=True)
class Rule:
    """Modules under ``source`` must not import anything under ``targets``."""

    source: str
    targets: tuple[str, ...]
    why: str


RULES: tuple[Rule, ...] = (
    Rule("compat", ("neuron_backend", "worker", "service", "dashboards"),
         "compat holds the settings and the one result schema every layer reads: it depends on nothing of ours"),
    Rule("neuron_backend", ("compat", "worker", "service", "dashboards"),
         "the device is a PyTorch backend: it knows nothing of the harness"),
    *(Rule(stage, ("service", "dashboards", ORCHESTRATION),
           "a stage of the harness never reaches the store, the pages or the layer that drives it")
      for stage in STAGES),
    Rule("worker.catalog", ("worker.build", "worker.run", "worker.judge"),
         "the catalog is the first stage: it uses no later one"),
    Rule("worker.build", ("worker.run", "worker.judge"), "building a tiny model uses no later stage"),
    Rule("worker.judge", ("worker.catalog", "worker.build", "worker.run"),
         "judging is pure: verdicts on measurements, whoever took them"),
    Rule("service", ("worker", "dashboards"),
         "the service is handed its enqueue function and its pages by the app factory's caller"),
    Rule("dashboards", ("worker", "neuron_backend"), "pages read only through service.queries"),
)

# Function-local imports allowed, by (module, function, imported module): each keeps an import out of a process
# that must stay light; none hides a cycle. The code carries the same reason in a comment at the import.
ALLOWED_LOCAL: dict[tuple[str, str, str], str] = {
    ("cli.app", "_harness", "cli.commands"):
        "`compat --help` and bad input answer without importing torch and transformers",
    ("cli.app", "_database", "service.commands"):
        "`compat --help` and bad input answer without importing SQLAlchemy and Alembic",
    ("cli.app", "_web", "cli.serve"):
        "`compat --help` and bad input answer without importing FastAPI and uvicorn",
    ("cli.app", "_cluster", "worker.orchestration.celery_app"):
        "`compat --help` and bad input answer without importing Celery",
    ("cli.app", "_calibration", "cli.calibrate"):
        "`compat --help` and bad input answer without importing torch, transformers and the simulated device",
    ("cli.app", "_stored", "cli.stored"):
        "bad input answers without SQLAlchemy unless a run id or an uncatalogued architecture is looked up",
    ("worker.orchestration.tasks", "_warm_pool_process", "worker.run.runner"):
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
    ("worker.orchestration.submissions", "run_submission", "worker.run.devices"):
        "the API process stays free of torch until a submission's device is resolved in it",
    ("worker.run.pool", "warm_imports", "torch"):
        "the pool's warm-up: a spawned worker imports torch here, once, before its first task",
    ("worker.run.pool", "warm_imports", "transformers"):
        "the pool's warm-up: a spawned worker imports transformers here, once, before its first task",
    ("service.validation", "check_config", "torch"):
        "the API process imports torch only when a submitted config is measured on the meta device",
    ("service.validation", "check_config", "transformers"):
        "the API process imports transformers only when a submitted config is measured on the meta device",
}
# Packages whose function-local imports are checked (neuron_backend has its own owners and rules).
LOCAL_IMPORT_PACKAGES = ("compat", "worker", "service", "dashboards")


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


def layer_violations(imports: Iterable[Import], rules: Iterable[Rule] = RULES) -> list[str]:
    out = []
    for imp in imports:
        for rule in rules:
            if _under(imp.importer, rule.source) and any(_under(imp.imported, t) for t in rule.targets):
                out.append(f"{imp.importer}:{imp.line} imports {imp.imported}: {rule.why}")
    return out


def cycles(imports: Iterable[Import], modules: Iterable[str]) -> list[list[str]]:
    """Strongly connected groups (more than one module) of the graph of module-level project imports."""
    nodes = set(modules)
    graph: dict[str, set[str]] = {n: set() for n in nodes}
    for imp in imports:
        if imp.function is None and not imp.type_checking and imp.imported in nodes and imp.imported != imp.importer:
            graph[imp.importer].add(imp.imported)
        # Importing a.b.c runs a/__init__ and a/b/__init__ first: those are edges too.
        if imp.function is None and not imp.type_checking:
            parts = imp.imported.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in nodes and parent != imp.importer and not _under(imp.importer, parent):
                    graph[imp.importer].add(parent)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(nodes):
        if v not in index:
            connect(v)
    return groups


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


def violations(root: Path) -> list[str]:
    """Everything that breaks the contract in the project under ``root``."""
    imports = all_imports(root)
    modules = module_files(root)
    out = layer_violations(imports)
    out += [f"import cycle: {' -> '.join(group)}" for group in cycles(imports, modules)]
    out += local_import_violations(imports)
    return out
