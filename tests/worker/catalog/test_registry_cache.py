"""The registry's model-type choices kept in a file (``registry_entries(cache=...)``): the same entries as read from
the modeling modules, read back without importing them, and recomputed when the file is stale, corrupt or unwritable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from worker.catalog.catalog import registry_entries
from worker.catalog.load import load_catalog


def test_a_cached_registry_is_the_registry_read_from_the_modeling_modules(tmp_path: Path) -> None:
    cache = tmp_path / "types.json"
    exact = registry_entries()
    assert registry_entries(cache=cache) == exact  # filled
    data = json.loads(cache.read_text())
    # Only the classes mapped from several model types need a modeling module: those are what the file keeps.
    assert data["choices"]["Llama4ForCausalLM"] == "llama4_text" and data["choices"]["LlamaForCausalLM"] == "llama"
    assert registry_entries(cache=cache) == exact  # read back


def test_a_second_process_reads_the_choices_without_importing_a_modeling_module(tmp_path: Path) -> None:
    cache = tmp_path / "types.json"
    registry_entries(cache=cache)
    code = ("import sys; from pathlib import Path; from worker.catalog.catalog import registry_entries\n"
            f"e = {{x.name: x.model_type for x in registry_entries(cache=Path({str(cache)!r}))}}\n"
            "mods = [m for m in sys.modules if m.startswith('transformers.models.') and '.modeling_' in m]\n"
            "print(e['Llama4ForCausalLM'], len(e), [m for m in mods if '.auto.' not in m])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["llama4_text", str(len(registry_entries())), "[]"]


def test_a_stale_or_corrupt_cache_is_recomputed_and_rewritten(tmp_path: Path) -> None:
    cache = tmp_path / "types.json"
    exact = registry_entries()
    registry_entries(cache=cache)
    data = json.loads(cache.read_text())
    # Written under other sources (another Transformers, an edited modeling file): a wrong answer is not read.
    cache.write_text(json.dumps({"key": "other", "choices": {**data["choices"], "Llama4ForCausalLM": "llama4"}}))
    assert registry_entries(cache=cache) == exact
    assert json.loads(cache.read_text()) == data
    for bad in ("{not json", "[]", json.dumps({"key": data["key"], "choices": "llama"})):
        cache.write_text(bad)
        assert registry_entries(cache=cache) == exact


def test_an_unwritable_cache_only_costs_the_imports(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    cache = blocked / "types.json"  # its folder is a file: nothing can be written there
    assert registry_entries(cache=cache) == registry_entries()
    assert not os.path.exists(cache)


def test_the_registry_source_keeps_its_choices_in_the_var_dir(isolated_settings) -> None:
    catalog = load_catalog("registry")
    cached = isolated_settings.var_dir / "catalog" / "registry-model-types.json"
    assert cached.exists()
    assert load_catalog("registry").entries == catalog.entries == registry_entries()
