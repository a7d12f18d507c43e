"""The shipped corpus (worker/catalog/corpus) as per-model catalog rows: every file a row, labelled "a cited sample,
unranked"; remote code, oversize, malformed and non-causal configs are rows with a refusal and its reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

from compat.model_rows import CORPUS_LABEL
from worker.catalog.corpus_models import CORPUS_DIR, corpus_rows, judge_config
from worker.catalog.hub import MAX_CONFIG_BYTES

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("compat", "worker", "service", "dashboards", "cli", "neuron_backend")


def test_every_corpus_file_is_one_labelled_row_with_its_source() -> None:
    rows = corpus_rows()
    index = json.loads((CORPUS_DIR / "index.json").read_text())["files"]
    assert len(rows) == len(index) == 79
    assert len({r.model_id for r in rows}) == 79
    assert all(r.catalog == CORPUS_LABEL and r.cited and r.cited.get("repo") and r.cited.get("commit") for r in rows)
    by_id = {r.model_id: r for r in rows}
    llama = by_id["meta-llama/Llama-3.1-8B-Instruct"]
    assert llama.refusal is None and llama.judged_as == "LlamaForCausalLM" and len(llama.config_digest) == 64
    assert by_id["corpus/baichuan2_reduced"].model_id.startswith("corpus/")  # no Hub id in its source


def test_refusals_are_rows_with_their_reason() -> None:
    by_id = {r.model_id: r for r in corpus_rows()}
    assert by_id["microsoft/phi-1_5"].refusal.startswith("remote code: model_type 'phi-msft'")
    assert by_id["stepfun-ai/Step-3.7-Flash"].refusal.startswith("remote code: architecture")
    assert "no valid 'model_type'" in by_id["corpus/qwen_v1_7b_reduced"].refusal  # malformed
    assert "not a causal-LM class" in by_id["corpus/devstral_small_2_24b_instruct"].refusal
    refused = [r for r in by_id.values() if r.refusal]
    assert all(r.run_id is None and r.tiny_digest is None for r in refused)


def test_oversize_and_malformed_configs_are_refused_not_raised() -> None:
    big = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "x": "' + b"a" * MAX_CONFIG_BYTES + b'"}'
    assert judge_config(big, "org/big")[1] == f"org/big: config.json is over {MAX_CONFIG_BYTES} bytes"
    assert "is not JSON" in judge_config(b"{not json", "org/bad")[1]
    assert "not a JSON object" in judge_config(b"[1, 2]", "org/list")[1]
    assert "hidden_size" in judge_config(b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
                                         b'"hidden_size": -1}', "org/neg")[1]


def test_product_code_never_reads_tests() -> None:
    pattern = re.compile(r"""["']tests["']|tests/data""")
    offenders = [str(p.relative_to(ROOT)) for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py")
                 if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
