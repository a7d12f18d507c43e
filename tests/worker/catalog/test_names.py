"""The catalog's names read without importing torch: the registry's classes parsed from Transformers' source must
be exactly ``registry_entries()``'s, in order; a snapshot's names come rank 1 first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from compat.results import ArchitectureEntry
from worker.catalog.catalog import Catalog, registry_entries, write_snapshot
from worker.catalog.names import catalog_names, mapping_pairs, registry_names, snapshot_names

REPO = Path(__file__).resolve().parents[3]


def test_registry_names_are_the_registry_entries_in_order() -> None:
    assert registry_names() == tuple(e.name for e in registry_entries())


def test_registry_names_import_neither_torch_nor_transformers() -> None:
    code = ("import sys; from worker.catalog.names import registry_names; n = registry_names(); "
            "print(len(n), [m for m in ('torch', 'transformers') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    count, heavy = done.stdout.split(" ", 1)
    assert int(count) == len(registry_entries()) and heavy.strip() == "[]"


def test_mapping_pairs_reads_only_a_literal_list_of_string_pairs() -> None:
    src = 'X = 1\nMODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(\n    [\n        ("a", "AForCausalLM"),\n' \
          '        # a comment\n        ("b", "BForCausalLM"),\n    ]\n)\n'
    assert mapping_pairs(src) == [("a", "AForCausalLM"), ("b", "BForCausalLM")]
    # Anything not literal means the source changed shape: no names rather than wrong ones.
    assert mapping_pairs('MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict([("a", NAME)])') is None
    assert mapping_pairs("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = build()") is None
    assert mapping_pairs("OTHER = OrderedDict([])") is None


def test_snapshot_names_rank_first_and_none_when_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    entries = [ArchitectureEntry(name=n, model_type="llama", rank=r) for n, r in (("B", 2), ("A", 1), ("C", 3))]
    write_snapshot(Catalog("hub", None, entries), path, endpoint="http://e", limit=3)
    assert snapshot_names(path) == ("A", "B", "C")
    assert snapshot_names(tmp_path / "missing.json") is None
    path.write_text("{not json")
    assert snapshot_names(path) is None


def test_catalog_names_follow_the_source(isolated_settings) -> None:  # noqa: ANN001 - fixture
    assert catalog_names("auto") == registry_names()  # no snapshot yet: auto is the registry
    entries = [ArchitectureEntry(name="MistralForCausalLM", model_type="mistral", rank=1)]
    write_snapshot(Catalog("hub", None, entries), isolated_settings.snapshot_path, endpoint="http://h", limit=1)
    assert catalog_names("auto") == catalog_names("snapshot") == ("MistralForCausalLM",)
    assert catalog_names("registry") == registry_names()
    assert catalog_names("hub") is None  # a live listing: only fetching it tells
