"""Catalog sources: the registry order and dedupe, snapshot round trip and corruption, source selection."""

from __future__ import annotations

import json

import pytest
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from compat.results import ArchitectureEntry
from worker.catalog.catalog import (
    SNAPSHOT_SCHEMA_VERSION,
    Catalog,
    CatalogError,
    read_snapshot,
    registry_entries,
    write_snapshot,
)
from worker.catalog.load import SOURCES, load_catalog


def test_registry_lists_every_causal_lm_class_once_in_transformers_order(isolated_settings):
    catalog = load_catalog("registry")
    names = catalog.names()
    expected = list(dict.fromkeys(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()))
    assert names == expected
    assert len(names) == len(set(names))
    assert [e.rank for e in catalog.entries] == list(range(1, len(names) + 1))
    assert catalog.source == "registry" and catalog.snapshot_id is None
    assert not any(e.remote_code for e in catalog.entries)


def test_registry_dedupe_keeps_the_model_type_of_the_class_own_config():
    by_name = {e.name: e.model_type for e in registry_entries()}
    # LlamaForCausalLM is mapped from internlm3, iquestcoder and llama; its config class is LlamaConfig.
    assert by_name["LlamaForCausalLM"] == "llama"
    # Llama4ForCausalLM takes the text config, not the composite Llama4Config.
    assert by_name["Llama4ForCausalLM"] == "llama4_text"
    assert by_name["GPT2LMHeadModel"] == "gpt2"
    for name, model_type in by_name.items():
        assert MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type] == name


def test_limit_takes_the_first_n(isolated_settings):
    full = load_catalog("registry").names()
    assert load_catalog("registry", limit=5).names() == full[:5]
    with pytest.raises(CatalogError, match="at least 1"):
        load_catalog("registry", limit=0)


def test_unknown_source_names_the_valid_ones(isolated_settings):
    with pytest.raises(CatalogError) as info:
        load_catalog("pypi")
    for source in SOURCES:
        assert source in str(info.value)


def test_auto_is_registry_without_snapshot_and_snapshot_with_one(isolated_settings):
    assert load_catalog("auto").source == "registry"
    entries = [ArchitectureEntry(name="MistralForCausalLM", model_type="mistral", rank=1, downloads=10,
                                 representative="m/x", config={"model_type": "mistral"})]
    write_snapshot(Catalog("hub", None, entries), isolated_settings.snapshot_path, endpoint="http://h", limit=3)
    catalog = load_catalog("auto")
    assert catalog.source == "snapshot"
    assert catalog.entries == entries
    assert catalog.snapshot_id


def test_snapshot_round_trip_is_atomic_and_versioned(tmp_path):
    path = tmp_path / "cat" / "snap.json"
    entries = [ArchitectureEntry(name=f"A{i}ForCausalLM", model_type="llama", rank=i, downloads=100 - i)
               for i in (2, 1, 3)]
    snap_id = write_snapshot(Catalog("hub", None, entries, skipped=[("bad/x", "HubError: no")]), path,
                             endpoint="http://e", limit=7)
    payload = json.loads(path.read_text())
    assert payload["schema_version"] == SNAPSHOT_SCHEMA_VERSION
    assert payload["endpoint"] == "http://e" and payload["limit"] == 7 and payload["created"]
    assert [p.name for p in path.parent.iterdir()] == ["snap.json"]  # no temp file left behind
    loaded = read_snapshot(path)
    assert loaded.snapshot_id == snap_id
    assert [e.rank for e in loaded.entries] == [1, 2, 3]  # ranked, rank 1 first
    assert loaded.skipped == [("bad/x", "HubError: no")]


@pytest.mark.parametrize("content, message", [
    ("{not json", "corrupt"),
    ('["a list"]', "corrupt"),
    ('{"schema_version": 99, "entries": []}', "schema version 99"),
    ('{"schema_version": 1, "entries": [{"name": "X"}]}', "invalid entries"),
])
def test_corrupt_snapshot_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "snap.json"
    path.write_text(content)
    with pytest.raises(CatalogError, match=message):
        read_snapshot(path)


def test_missing_snapshot_says_how_to_make_one(isolated_settings):
    with pytest.raises(CatalogError, match="compat catalog refresh"):
        load_catalog("snapshot")
