"""Models as catalog rows: the per-model record (a Hub model or a cited config, its plan, which run judged it) and
the pure read rules over such rows (its verdict, the per-model headline, what an unknown config differs in).

The CLI (``compat lookup``, ``compat sweep --models``), the API (``/api/v1/models``) and the pages read these
rules through ``service.model_queries``; none keeps its own copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from compat.results import KEEP_NON_FINITE, verdict

CORPUS_LABEL = "a cited sample, unranked"  # the shipped corpus: real configs, not a ranking by use
CORPUS_SOURCE = "corpus"
HUB_SOURCE = "hub"
# "org/name" as the Hub spells it (huggingface_hub.utils.validate_repo_id plus its 96-character name limit; the
# Hub's legacy ids such as "gpt2" have no org); a corpus row without a Hub id is named "corpus/<file stem>".
MODEL_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
OUT_OF_THE_BOX = frozenset({"supported", "supported_with_fallback"})


class ModelRow(BaseModel):
    """One model of a catalog: its identity, its full-size config's digest, and, once planned and judged, its
    plan (``compat.plan.Plan`` as a dict), the digest of the tiny config it was judged with, and that run."""

    model_config = KEEP_NON_FINITE

    model_id: str
    architecture: str  # architectures[0]
    judged_as: str | None = None  # the causal-LM class its tiny config runs as (a native wrapper's text model)
    model_type: str = ""
    source: str = CORPUS_SOURCE  # corpus | hub
    catalog: str = CORPUS_LABEL  # which catalog, ranked how, as of when (the headline names it)
    sha: str | None = None  # the Hub commit its config.json was read at (hub rows)
    config_digest: str = ""  # compat.configjson.config_digest of the full-size config
    downloads: int | None = None
    trending: float | None = None
    cited: dict[str, Any] | None = None  # corpus rows: the source repo, path and commit of the config
    refusal: str | None = None  # why it is never built (remote code, oversize, malformed): a row, not a crash
    config: dict[str, Any] | None = None  # the full-size config.json (for "what it differs in")
    tiny_digest: str | None = None  # the shrunk config's digest: models sharing it share one run
    plan: dict[str, Any] | None = None
    device: str | None = None
    run_id: str | None = None


class ModelCheck(BaseModel):
    """One check's outcome for a model (its tiny config's run)."""

    status: str
    blocking_op: str | None = None
    reason: str | None = None


class ModelAnswer(BaseModel):
    """What ``compat lookup`` and ``GET /api/v1/models/{org}/{name}`` return; ``basis`` says what it rests on."""

    model_id: str
    architecture: str
    verdict: str
    checks: dict[str, ModelCheck] = Field(default_factory=dict)
    plan: dict[str, Any] | None = None
    basis: str  # "judged with its own config" | "architecture's verdict; this model was not run" | refusal
    sha: str | None = None
    catalog: str | None = None
    device: str | None = None
    run_id: str | None = None
    refusal: str | None = None
    differs_in: list[str] = Field(default_factory=list)  # unknown models: keys differing from the judged config


def valid_model_id(model_id: str) -> bool:
    return bool(MODEL_ID.match(model_id)) and ".." not in model_id and "--" not in model_id


def model_verdict(statuses: Mapping[str, str], fallback: bool, refusal: str | None = None) -> str:
    """The model's verdict: the architecture rule (``compat.results.verdict``) over its own run, ``refused`` when
    the harness never builds it (remote code, oversize, malformed), ``not_judged`` with no run."""
    if refusal:
        return "refused"
    if not statuses:
        return "not_judged"
    return verdict(statuses, fallback)


@dataclass(frozen=True)
class ModelHeadline:
    """'of 79 models: 61 run out of the box; 12 need more than one NeuronCore' with its catalog and date."""

    models: int
    out_of_the_box: int
    multi_core: int
    refused: int
    catalog: str
    date: str | None

    def text(self) -> str:
        when = f", {self.date}" if self.date else ""
        refused = f"; {self.refused} refused (remote code or bad config)" if self.refused else ""
        return (f"of {self.models} models: {self.out_of_the_box} run out of the box; {self.multi_core} need more "
                f"than one NeuronCore{refused} ({self.catalog}{when}; plans from config.json, not run)")


def model_headline(verdicts: Iterable[tuple[str, dict[str, Any] | None]], catalog: str,
                   date: str | None) -> ModelHeadline:
    """The per-model headline over (verdict, plan) pairs, one per model of the catalog."""
    rows = list(verdicts)
    return ModelHeadline(
        models=len(rows),
        out_of_the_box=sum(1 for v, _ in rows if v in OUT_OF_THE_BOX),
        multi_core=sum(1 for _, p in rows if p and (p.get("neuron_cores") or 0) > 1),
        refused=sum(1 for v, _ in rows if v == "refused"),
        catalog=catalog, date=date)


SIZE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
             "vocab_size", "head_dim", "num_experts", "num_local_experts", "n_routed_experts",
             "max_position_embeddings", "rope_scaling", "rope_parameters", "tie_word_embeddings", "torch_dtype",
             "dtype", "sliding_window", "layer_types", "model_type")


def differs_in(config: Mapping[str, Any], judged: Mapping[str, Any]) -> list[str]:
    """The keys in which ``config`` differs from a judged config of its architecture, as 'key: theirs -> ours'
    (the keys that shape a model first, then any other), so an unknown model's answer says what was not run."""
    keys = [k for k in SIZE_KEYS if k in config or k in judged]
    keys += sorted(k for k in set(config) | set(judged) if k not in SIZE_KEYS and not k.startswith("_"))
    out = []
    for k in keys:
        a, b = judged.get(k), config.get(k)
        if a != b:
            out.append(f"{k}: {_short(a)} -> {_short(b)}")
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
