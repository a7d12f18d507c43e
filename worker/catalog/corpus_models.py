"""The shipped corpus of real, cited config.json files (``worker/catalog/corpus``) as per-model catalog rows.

The offline default catalog of models: "a cited sample, unranked". Each file is validated as a Hub config is
(size cap, JSON object, sane names and sizes); remote code, oversize, malformed and non-causal-LM configs become rows
with a refusal and its reason, never an exception.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import transformers

from compat.configjson import config_digest
from compat.model_rows import CORPUS_LABEL, CORPUS_SOURCE, ModelRow
from compat.native import architecture_of, causal_lm_problem, registry_of, remote_code_verdict
from worker.catalog.hub import HubError, validate_config

CORPUS_DIR = Path(__file__).with_name("corpus")
INDEX_FILE = "index.json"


def corpus_model_id(row: dict[str, Any]) -> str:
    """The row's Hub id where its source names one, else ``corpus/<file stem>`` (never a Hub id)."""
    return row.get("model_id") or f"corpus/{Path(row['file']).stem}"


def judge_config(raw: bytes, name: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(config, refusal, judged class): the parsed config; why the harness never builds it (None when it may); and
    the causal-LM class it is judged as (``classify``)."""
    try:
        config = validate_config(raw, name)
    except HubError as exc:
        return None, str(exc), None
    return (config, *classify(config))


def classify(config: dict[str, Any]) -> tuple[str | None, str | None]:
    """(refusal, judged class) of a valid config: remote code and non-causal classes are refused with the reason;
    the class is ``architectures[0]``, or for a native wrapper (``Qwen3_5ForConditionalGeneration``) the causal LM
    of its model_type, as ``AutoModelForCausalLM`` loads it (text only)."""
    registry = registry_of(transformers)
    code = remote_code_verdict(config, registry)
    if code.remote_code:
        return f"remote code: {code.reason}", None
    problem = causal_lm_problem(config, registry)
    if problem is None:
        return None, architecture_of(config)
    text_lm = registry.causal_lm.get(str(config.get("model_type")))
    if text_lm:
        return None, text_lm
    return problem, None


def corpus_rows(corpus: Path = CORPUS_DIR) -> list[ModelRow]:
    """One row per file of the corpus index, in index order; a file that is missing or unreadable is a refusal."""
    index = json.loads((corpus / INDEX_FILE).read_text(encoding="utf-8"))["files"]
    rows = []
    for entry in index:
        path = corpus / entry["file"]
        try:
            raw = path.read_bytes()
        except OSError as exc:
            config, refusal, judged = None, f"{entry['file']}: cannot read ({exc.strerror})", None
        else:
            config, refusal, judged = judge_config(raw, corpus_model_id(entry))
        rows.append(ModelRow(
            model_id=corpus_model_id(entry),
            architecture=(architecture_of(config) if config else None) or entry.get("architecture") or "?",
            model_type=str((config or {}).get("model_type") or entry.get("model_type") or ""),
            source=CORPUS_SOURCE, catalog=CORPUS_LABEL,
            config_digest=config_digest(config) if config is not None else "",
            cited={**entry.get("source", {}), "file": entry["file"], "provenance": entry.get("provenance")},
            refusal=refusal, config=config, judged_as=judged))
    return rows
