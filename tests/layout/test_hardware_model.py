"""The hardware model (neuron_backend/hardware/) stands apart from the PyTorch glue: it imports nothing else of
neuron_backend, as torch_openreg keeps third_party/openreg apart from csrc/ (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARDWARE = ROOT / "neuron_backend" / "hardware"


def glue_imports(folder: Path) -> list[str]:
    """Every import of neuron_backend outside neuron_backend.hardware in ``folder``'s Python files, as
    "file:line module" (module-level or not: a function-local import couples the model to the glue as much)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] if node.module != "neuron_backend" else [
                    f"neuron_backend.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "neuron_backend" and not name.startswith("neuron_backend.hardware"):
                    found.append(f"{path.relative_to(folder)}:{node.lineno} {name}")
    return found


def test_the_hardware_model_imports_nothing_of_the_glue() -> None:
    assert (HARDWARE / "profiles.py").is_file() and (HARDWARE / "profiles").is_dir()
    assert glue_imports(HARDWARE) == []


def test_a_glue_import_in_the_model_is_found(tmp_path: Path) -> None:
    (tmp_path / "rules.py").write_text("from neuron_backend.hardware import profiles\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.py").write_text(
        "def f():\n    from neuron_backend import config, hardware\n    import neuron_backend.errors\n")
    assert glue_imports(tmp_path) == ["sub/x.py:2 neuron_backend.config", "sub/x.py:3 neuron_backend.errors"]
