"""The corpus of real config.json files (worker/catalog/corpus, shipped product data) and its index agree, parse, and are sourced.

It also pins each row's ``native`` flag to the installed Transformers registry; it builds no model.
"""

from __future__ import annotations

import json
import re

import pytest
import transformers
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from worker.catalog.corpus_models import CORPUS_DIR

CORPUS = CORPUS_DIR
INDEX = CORPUS / "index.json"
PROVENANCE = {
    "verbatim",
    "reduced_by_source",
    "reserialized_by_source",
    "abridged_by_source",
    "edited_by_source",
    "reconstructed_from_python_dict",
    "embedded_by_source",
}


def _rows() -> list[dict]:
    return json.loads(INDEX.read_text(encoding="utf-8"))["files"]


def _config(name: str) -> dict:
    # Python's json accepts NaN/Infinity (as real configs use them); they must survive, not be rejected.
    return json.loads((CORPUS / name).read_text(encoding="utf-8"))


def _causal_lm_classes() -> set[str]:
    names: set[str] = set()
    for value in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values():
        names.update(value if isinstance(value, (list, tuple)) else [value])
    return names


def test_index_lists_every_file_and_nothing_else() -> None:
    listed = [row["file"] for row in _rows()]
    on_disk = sorted(p.name for p in CORPUS.glob("*.json") if p.name != INDEX.name)
    assert len(listed) == len(set(listed)), "a file is listed twice"
    assert sorted(listed) == on_disk


def test_corpus_is_large_and_varied_enough() -> None:
    rows = _rows()
    assert len(rows) >= 60
    assert len({row["architecture"] for row in rows}) >= 40
    # Both paths of the remote-code rule need real examples.
    assert sum(row["native"] for row in rows) >= 30
    assert sum(not row["native"] for row in rows) >= 5


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row["file"])
def test_file_parses_and_matches_its_row(row: dict) -> None:
    config = _config(row["file"])
    assert isinstance(config, dict)
    assert isinstance(config.get("architectures"), list) and config["architectures"]
    assert row["architecture"] == config["architectures"][0]
    assert row["model_type"] == config.get("model_type")


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row["file"])
def test_native_flag_matches_installed_transformers(row: dict) -> None:
    arch = row["architecture"]
    causal = arch in _causal_lm_classes()
    assert row["causal_lm_class"] is causal
    assert row["native"] is (causal or hasattr(transformers, arch))


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row["file"])
def test_row_cites_its_source(row: dict) -> None:
    source = row["source"]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"]), source
    assert source["path"].strip()
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) or (source["commit"] == "unknown" and source["file_id"])
    assert row["provenance"] in PROVENANCE
    if row["provenance"] == "reconstructed_from_python_dict":
        assert source.get("entry"), "a reconstructed file must name the dict it came from"
    assert isinstance(row["notes"], list)
