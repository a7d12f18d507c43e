"""The device autoloads with torch (the ``torch.backends`` entry point) and stands aside for a real torch-neuronx.

Each case runs a fresh interpreter: autoload happens inside ``import torch``. The entry point is the one pyproject.toml
declares, carried by a throw-away dist-info on the child's sys.path (the venv's own install may predate it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
GROUP = "torch.backends"  # torch 2.13.0 torch/__init__.py _import_device_backends


def declared_entry_points() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project.get("entry-points", {}).get(GROUP, {})


def dist_info(folder: Path, name: str, version: str, entry_points: dict[str, str] | None = None) -> Path:
    """A minimal installed-distribution record (what importlib.metadata and torch's entry-point scan read)."""
    d = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if entry_points:
        lines = [f"[{GROUP}]", *(f"{k} = {v}" for k, v in entry_points.items())]
        (d / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return folder


def run(code: str, *paths: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    environ.update(env)
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *map(str, paths), environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def autoload_path(tmp_path_factory) -> Path:
    eps = declared_entry_points()
    assert eps, f"pyproject.toml declares no {GROUP} entry point"
    return dist_info(tmp_path_factory.mktemp("ep"), "neuron-compat-probe", "0", eps)


def test_pyproject_declares_the_autoload_entry_point() -> None:
    assert declared_entry_points() == {"neuron_backend": "neuron_backend:_autoload"}


def test_import_torch_alone_gives_the_device_and_keeps_dynamo_unloaded(autoload_path: Path) -> None:
    r = run("""
        import sys, torch
        t = torch.zeros(1, device="neuron")
        print(t.device, torch.neuron.device_count() > 0, sys.modules["torch_neuronx"].SIMULATED)
        print("torch._dynamo" in sys.modules, "neuron_backend.compile_backend" in sys.modules)
        f = torch.compile(lambda x: x * 2 + 1, backend="neuron")  # the lazily registered backend
        print(f(torch.ones(2, device="neuron")).tolist())
    """, autoload_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["neuron:0 True True", "False False", "[3.0, 3.0]"]


def test_autoload_off_registers_nothing(autoload_path: Path) -> None:
    r = run("""
        import sys, torch
        print("neuron_backend" in sys.modules, "torch_neuronx" in sys.modules)
        torch.zeros(1, device="neuron")
    """, autoload_path, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.stdout.strip() == "False False"
    assert r.returncode != 0 and "neuron" in r.stderr


def test_import_neuron_backend_still_registers_without_autoload() -> None:
    r = run("""
        import torch, neuron_backend
        print(neuron_backend.SIMULATED, torch.zeros(1, device="neuron").device)
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True neuron:0"


def test_an_installed_torch_neuronx_wins_and_the_simulation_registers_nothing(autoload_path: Path,
                                                                               tmp_path: Path) -> None:
    """A torch-neuronx distribution on sys.path (dist-info only: its package is not needed to be seen installed):
    the autoloaded simulation stands aside, leaves PrivateUse1 unnamed, and installs no torch_neuronx module."""
    real = dist_info(tmp_path, "torch-neuronx", "2.13.3")
    r = run("""
        import sys, torch
        import neuron_backend
        print(neuron_backend.SIMULATED, torch._C._get_privateuse1_backend_name(), hasattr(torch, "neuron"))
        print("torch_neuronx" in sys.modules, neuron_backend.NOT_REGISTERED_REASON)
    """, real, autoload_path)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.split("\n")[:2]
    assert first == "False privateuseone False"
    assert second.startswith("False torch-neuronx 2.13.3 is installed")
