"""Tests of neuron_backend.hardware.observations: the shipped real-hardware evidence loads, cites only what it defines,
agrees with the test configs, and malformed files fail loudly."""

from __future__ import annotations

import ast
import copy
import json
import sys
from pathlib import Path

import pytest

from neuron_backend.hardware import observations as obsmod
from neuron_backend.hardware.observations import EvidenceError, load
from worker.catalog.corpus_models import CORPUS_DIR

CONFIGS = CORPUS_DIR  # the cited config corpus, shipped as product data (issue 33)


@pytest.fixture(scope="module")
def evidence() -> obsmod.Evidence:
    return load()


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(obsmod.DEFAULT_PATH.read_text())


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "obs.json"
    path.write_text(json.dumps(doc))
    return path


def _minimal() -> dict:
    return {
        "note": "test",
        "sources": {"s": {"repo": "o/r", "path": "f.md", "commit": "a" * 40, "ref": "A", "verified": True, "note": ""}},
        "toolchains": {"t": {"torch": "2.12", "torch_neuronx": None, "neuronx_cc": None, "transformers": None,
                             "instance": "trn2.3xlarge", "source": "s"}},
        "observations": [{"model_id": "m/x", "architecture": "XForCausalLM", "architecture_inferred": True,
                          "architecture_basis": "test", "toolchain": "t", "source": "s", "patch_note": None,
                          "config": None,
                          "runs": [{"work": "prefill_forward", "mode": "eager", "outcome": "pass", "error": None,
                                    "op": None, "patched": False, "note": ""}]}],
        "facts": [{"id": "f", "fact": "x", "error": None, "op": None, "dtypes": ["int64"], "mode": "both",
                   "toolchain": "t", "source": "s", "verified": True}],
    }


def test_shipped_file_loads_and_is_cached(evidence):
    assert len(evidence.observations) >= 80
    assert len(evidence.facts) >= 10
    assert load() is evidence  # the default path is parsed once
    assert load(obsmod.DEFAULT_PATH) is evidence


def test_minimal_file_loads(tmp_path):
    ev = load(_write(tmp_path, _minimal()))
    assert [o.model_id for o in ev.observations] == ["m/x"]
    assert ev.fact("f").dtypes == ("int64",)


def test_every_cited_source_exists_and_has_a_commit(evidence, raw):
    cited = {o.source for o in evidence.observations}
    cited |= {r.source for o in evidence.observations for r in o.runs if r.source}
    cited |= {t.source for t in evidence.toolchains.values()} | {f.source for f in evidence.facts}
    assert cited <= set(evidence.sources)
    for sid in cited:
        src = evidence.sources[sid]
        assert src.repo and src.path and src.commit, sid
        assert src.ref in {"A", "B", "C", "D", "E"}
    # A source not read must say so: verified=false needs an explanation in its note.
    for sid, src in raw["sources"].items():
        if not src["verified"]:
            assert src["note"], sid


def test_verified_sources_carry_full_commits(evidence):
    # A commit we read the file at can always be spelled out in full; short shas are for unresolved ones.
    for sid, src in evidence.sources.items():
        if src.verified:
            assert len(src.commit) == 40, sid


def test_every_observation_uses_a_defined_toolchain(evidence):
    for obs in evidence.observations:
        assert obs.toolchain in evidence.toolchains, obs.model_id
        assert obs.runs, obs.model_id


def test_configs_exist_and_match_architecture(evidence):
    index = {f["file"]: f for f in json.loads((CONFIGS / "index.json").read_text())["files"]}
    matched = [o for o in evidence.observations if o.config]
    assert matched, "expected some observations to map to a test config"
    for obs in matched:
        assert (CONFIGS / obs.config).is_file(), obs.config
        assert index[obs.config]["model_id"] == obs.model_id
        arch = json.loads((CONFIGS / obs.config).read_text())["architectures"][0]
        assert arch == obs.architecture, (obs.model_id, arch, obs.architecture)


def test_config_is_set_whenever_an_exact_model_id_match_exists(evidence):
    by_id = {f["model_id"]: f["file"] for f in json.loads((CONFIGS / "index.json").read_text())["files"]
             if f["model_id"]}
    for obs in evidence.observations:
        assert obs.config == by_id.get(obs.model_id), obs.model_id


def test_leaderboard_coverage(evidence):
    # LEADERBOARD.md @ b7b6cbad: 74 rows across 60 models.
    rows = [o for o in evidence.observations if o.source == "A_leaderboard"]
    assert len(rows) == 74
    assert len({o.model_id for o in rows}) == 60


def test_outcome_for_unobserved_work_is_unknown(evidence):
    obs = next(o for o in evidence.observations if o.model_id == "microsoft/phi-2")
    assert obs.outcome_for("prefill_forward", "eager") == "pass"
    assert obs.outcome_for("generate", "eager") == "unknown"  # A never calls generate()
    assert obs.outcome_for("train", "compile") == "unknown"
    assert obs.outcome_for("prefill_forward", "compile") == "unknown"  # config-only row: mode not recorded
    assert obs.outcome_for("prefill_forward", "eager", patched=True) == "unknown"


def test_outcome_for_patched_and_mixed_runs(evidence):
    q4b = next(o for o in evidence.observations if o.model_id == "Qwen/Qwen3.5-4B")
    assert q4b.outcome_for("prefill_forward", "compile") == "fail"
    assert q4b.outcome_for("prefill_forward", "compile", patched=True) == "pass"
    assert q4b.outcome_for("prefill_forward", "compile", patched=None) == "partial"
    olmoe = next(o for o in evidence.observations if o.model_id == "allenai/OLMoE-1B-7B-0924")
    assert olmoe.runs[0].op == "aten::sort"
    assert olmoe.outcome_for("prefill_forward", "eager") == "fail"


def test_cause_not_recorded_failures_have_no_error(evidence):
    for mid in ("microsoft/Phi-3.5-mini-instruct", "microsoft/phi-4", "EleutherAI/gpt-neo-1.3B"):
        obs = next(o for o in evidence.observations if o.model_id == mid)
        assert obs.outcome_for("prefill_forward", "eager") == "fail"
        assert all(r.error is None and "not recorded" in r.note for r in obs.runs)


def test_by_architecture_groups_every_observation(evidence):
    groups = evidence.by_architecture()
    assert sum(len(v) for v in groups.values()) == len(evidence.observations)
    assert {o.model_id for o in groups["Phi3ForCausalLM"]} == {"microsoft/Phi-3.5-mini-instruct", "microsoft/phi-4"}


def test_facts(evidence):
    topk = evidence.fact("integer_topk_sort")
    assert "NCC_EVRF013" in topk.error and set(topk.dtypes) == {"int32", "int64"} and topk.verified
    assert evidence.fact("argmax_on_device").op == "aten::argmax"
    assert "divisible by 128" in evidence.fact("grouped_mm_token_multiple_128").error
    assert "complex dtypes are not supported natively on Neuron" in evidence.fact("complex_dtype_eager").error
    with pytest.raises(KeyError, match="no_such_fact"):
        evidence.fact("no_such_fact")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["observations"][0].update(source="nope"), "source 'nope' is not defined"),
        (lambda d: d["observations"][0]["runs"][0].update(source="nope"), "run 0: source 'nope'"),
        (lambda d: d["facts"][0].update(source="gone"), "source 'gone' is not defined"),
        (lambda d: d["toolchains"]["t"].update(source="gone"), "toolchain 't': source 'gone'"),
        (lambda d: d["observations"][0].update(toolchain="tx"), "toolchain 'tx' is not defined"),
        (lambda d: d["observations"][0]["runs"][0].update(outcome="works"), "outcome 'works' is not one of"),
        (lambda d: d["observations"][0]["runs"][0].update(mode="jit"), "mode 'jit' is not one of"),
        (lambda d: d["observations"][0]["runs"][0].update(work="serve"), "work 'serve' is not one of"),
        (lambda d: d["facts"][0].update(mode="sometimes"), "mode 'sometimes'"),
        (lambda d: d["sources"]["s"].pop("commit"), "source 's': missing 'commit'"),
        (lambda d: d["sources"]["s"].update(commit="main"), "commit 'main' is not"),
        (lambda d: d["sources"]["s"].pop("repo"), "source 's': missing 'repo'"),
        (lambda d: d["sources"]["s"].update(path=""), "source 's': missing 'path'"),
        (lambda d: d["observations"][0].pop("model_id"), "missing 'model_id'"),
        (lambda d: d["facts"].append(copy.deepcopy(d["facts"][0])), "fact ids are not unique"),
    ],
)
def test_bad_files_raise_evidence_error(tmp_path, mutate, message):
    doc = _minimal()
    mutate(doc)
    with pytest.raises(EvidenceError, match=message):
        load(_write(tmp_path, doc))


def test_unreadable_file_raises_evidence_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(EvidenceError, match="cannot read"):
        load(bad)
    with pytest.raises(EvidenceError):
        load(tmp_path / "missing.json")
    assert issubclass(EvidenceError, ValueError)


def test_loader_imports_only_stdlib():
    # neuron_backend must not pull in worker/ or service/, and this loader needs nothing outside the stdlib.
    tree = ast.parse(Path(obsmod.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names
