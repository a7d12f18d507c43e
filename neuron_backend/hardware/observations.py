"""Loads profile_sources/observations.json: what real Trainium hardware was seen to do with HF causal LMs.
Validates every record against its cited sources and toolchains, and answers "did work W in mode M pass?"."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

DEFAULT_PATH = Path(__file__).parent / "profile_sources" / "observations.json"

WORKS = frozenset({"prefill_forward", "generate", "train"})
MODES = frozenset({"eager", "compile"})
OUTCOMES = frozenset({"pass", "fail", "partial", "unknown"})
FACT_MODES = frozenset({"eager", "compile", "both"})
REFS = frozenset({"A", "B", "C", "D", "E"})  # D: czkkkkkk/rl_examples, E: whn09/xpu-perf
# Short shas are allowed because a source we could not resolve keeps the sha the evidence file gave.
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


class EvidenceError(ValueError):
    """The observations file is malformed or cites something it does not define."""


@dataclass(frozen=True)
class Source:
    id: str
    repo: str
    path: str
    commit: str
    ref: str
    verified: bool
    note: str


@dataclass(frozen=True)
class Toolchain:
    id: str
    source: str
    instance: str | None
    torch: str | None
    torch_neuronx: str | None
    neuronx_cc: str | None
    transformers: str | None
    sdk: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Run:
    work: str
    mode: str
    outcome: str
    patched: bool
    note: str
    error: str | None = None
    op: str | None = None
    source: str | None = None  # overrides the observation's source when one run has its own citation


@dataclass(frozen=True)
class Observation:
    model_id: str
    architecture: str
    architecture_inferred: bool
    architecture_basis: str
    toolchain: str
    runs: tuple[Run, ...]
    source: str
    patch_note: str | None = None
    config: str | None = None
    note: str | None = None

    def outcome_for(self, work: str, mode: str, *, patched: bool | None = False) -> str:
        """The observed outcome of `work` in `mode`; patched=None accepts patched and unpatched runs alike.

        Several matching runs that disagree (say an unpatched fail and a patched pass when patched=None)
        give "partial": the model ran that way only some of the time. "unknown" runs carry no signal.
        """
        seen = {r.outcome for r in self.runs
                if r.work == work and r.mode == mode and (patched is None or r.patched == patched)}
        seen.discard("unknown")
        if not seen:
            return "unknown"
        return seen.pop() if len(seen) == 1 else "partial"


@dataclass(frozen=True)
class Fact:
    id: str
    fact: str
    source: str
    mode: str
    dtypes: tuple[str, ...]
    verified: bool
    error: str | None = None
    op: str | None = None
    toolchain: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Evidence:
    note: str
    sources: Mapping[str, Source]
    toolchains: Mapping[str, Toolchain]
    observations: tuple[Observation, ...]
    facts: tuple[Fact, ...]

    def by_architecture(self) -> dict[str, list[Observation]]:
        out: dict[str, list[Observation]] = {}
        for obs in self.observations:
            out.setdefault(obs.architecture, []).append(obs)
        return out

    def fact(self, fact_id: str) -> Fact:
        for f in self.facts:
            if f.id == fact_id:
                return f
        raise KeyError(f"no fact {fact_id!r}; known: {sorted(f.id for f in self.facts)}")


def _need(rec: dict[str, Any], key: str, where: str) -> Any:
    # Missing and empty are the same failure: a record without its citation or key field is unusable.
    if rec.get(key) in (None, ""):
        raise EvidenceError(f"{where}: missing {key!r}")
    return rec[key]


def _one_of(value: str, allowed: frozenset[str], what: str, where: str) -> str:
    if value not in allowed:
        raise EvidenceError(f"{where}: {what} {value!r} is not one of {sorted(allowed)}")
    return value


def _parse(raw: dict[str, Any]) -> Evidence:
    sources: dict[str, Source] = {}
    for sid, s in _need(raw, "sources", "file").items():
        where = f"source {sid!r}"
        commit = str(_need(s, "commit", where))
        if not _COMMIT.fullmatch(commit):
            raise EvidenceError(f"{where}: commit {commit!r} is not a 7-40 digit hex sha")
        sources[sid] = Source(sid, _need(s, "repo", where), _need(s, "path", where), commit,
                              _one_of(s.get("ref", ""), REFS, "ref", where), bool(s.get("verified", False)),
                              s.get("note", ""))

    def cited(sid: str | None, where: str) -> None:
        if sid is not None and sid not in sources:
            raise EvidenceError(f"{where}: source {sid!r} is not defined in 'sources'")

    toolchains: dict[str, Toolchain] = {}
    for tid, t in _need(raw, "toolchains", "file").items():
        where = f"toolchain {tid!r}"
        cited(_need(t, "source", where), where)
        toolchains[tid] = Toolchain(tid, t["source"], t.get("instance"), t.get("torch"), t.get("torch_neuronx"),
                                    t.get("neuronx_cc"), t.get("transformers"), t.get("sdk"), t.get("note"))

    def tooled(tid: str | None, where: str) -> None:
        if tid is not None and tid not in toolchains:
            raise EvidenceError(f"{where}: toolchain {tid!r} is not defined in 'toolchains'")

    observations = []
    for i, o in enumerate(_need(raw, "observations", "file")):
        where = f"observation {i} ({o.get('model_id', '?')})"
        cited(_need(o, "source", where), where)
        tooled(_need(o, "toolchain", where), where)
        runs = []
        for j, r in enumerate(_need(o, "runs", where)):
            rw = f"{where} run {j}"
            cited(r.get("source"), rw)
            runs.append(Run(_one_of(_need(r, "work", rw), WORKS, "work", rw),
                            _one_of(_need(r, "mode", rw), MODES, "mode", rw),
                            _one_of(_need(r, "outcome", rw), OUTCOMES, "outcome", rw),
                            bool(r.get("patched", False)), r.get("note", ""), r.get("error"), r.get("op"),
                            r.get("source")))
        observations.append(Observation(_need(o, "model_id", where), _need(o, "architecture", where),
                                        bool(o.get("architecture_inferred", True)), o.get("architecture_basis", ""),
                                        o["toolchain"], tuple(runs), o["source"], o.get("patch_note"),
                                        o.get("config"), o.get("note")))

    facts = []
    for f in raw.get("facts", []):
        where = f"fact {f.get('id', '?')!r}"
        cited(_need(f, "source", where), where)
        tooled(f.get("toolchain"), where)
        facts.append(Fact(_need(f, "id", where), _need(f, "fact", where), f["source"],
                          _one_of(_need(f, "mode", where), FACT_MODES, "mode", where), tuple(f.get("dtypes", [])),
                          bool(f.get("verified", False)), f.get("error"), f.get("op"), f.get("toolchain"),
                          f.get("note")))
    if len({f.id for f in facts}) != len(facts):
        raise EvidenceError("fact ids are not unique")
    # Read-only mappings: the default Evidence is cached and shared, so no caller may mutate it.
    return Evidence(raw.get("note", ""), MappingProxyType(sources), MappingProxyType(toolchains),
                    tuple(observations), tuple(facts))


@lru_cache(maxsize=1)
def _load_default() -> Evidence:
    return _load_file(DEFAULT_PATH)


def _load_file(path: Path) -> Evidence:
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"{path}: cannot read ({exc})") from exc
    if not isinstance(raw, dict):
        raise EvidenceError(f"{path}: top level is not an object")
    return _parse(raw)


def load(path: Path | None = None) -> Evidence:
    """The validated evidence; the shipped file is parsed once per process, any other path on every call."""
    if path is None or Path(path) == DEFAULT_PATH:
        return _load_default()
    return _load_file(Path(path))
