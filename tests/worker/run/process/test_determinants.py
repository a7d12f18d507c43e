"""What a run records as determining its results (worker/run/process/determinants.py), read from the installed packages and
the resolved device: every kind compat.moved diffs."""

from __future__ import annotations

import re
import shutil
from importlib.metadata import version
from pathlib import Path

import pytest

from compat.moved import KINDS, LIBRARIES
from worker.run.process.determinants import profile_digest, run_determinants
from worker.run.process.devices import resolve_device


def test_a_cpu_run_records_the_libraries_backend_mode_and_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_CPU_FALLBACK", "1")
    got = run_determinants(resolve_device("cpu"))
    for lib in LIBRARIES:
        assert got[lib] == version(lib)
    assert got["device backend"].startswith("CPU (") and got["backend version"] == version("torch")
    assert got["mode"] == "fallback" and got["harness"] == version("neuron-compat")
    assert "profile" not in got and not any(k.startswith("switch ") for k in got)
    monkeypatch.setenv("NEURON_CPU_FALLBACK", "0")  # what `compat sweep --strict` sets for every worker
    assert run_determinants(resolve_device("cpu"))["mode"] == "strict"


def test_the_simulated_device_records_its_profile_digest_and_switches() -> None:
    dev = resolve_device("neuron")
    if not dev.info.simulated:
        pytest.skip("a real torch-neuronx is installed")
    got = run_determinants(dev)
    assert got["device backend"] == "neuron (simulated)" and got["profile"] == dev.info.details["profile"]
    assert re.fullmatch(r"[0-9a-f]{16}", got["profile digest"])
    switches = {f"switch {sw['id']}": sw["active"] for sw in dev.backend.switches()}
    assert switches and {k: v for k, v in got.items() if k.startswith("switch ")} == switches
    assert set(got) - set(switches) == set(KINDS)


def test_the_profile_digest_moves_with_the_table_or_any_source(tmp_path: Path) -> None:
    nb = pytest.importorskip("neuron_backend")

    src = Path(nb.__file__).parent / "hardware"  # the hardware model's folder: profiles and their sources
    copy = tmp_path / "nb"
    shutil.copytree(src / "profiles", copy / "profiles")
    shutil.copytree(src / "profile_sources", copy / "profile_sources")
    before = profile_digest(copy, "trn2")
    assert profile_digest(copy, "trn2") == before and profile_digest(copy, "trn3") != before
    with (copy / "profile_sources" / "observations.json").open("a") as f:
        f.write("\n")
    assert profile_digest(copy, "trn2") != before
