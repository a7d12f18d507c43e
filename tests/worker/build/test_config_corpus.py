"""The corpus of real config.json files (worker/catalog/corpus, shipped product data) through the harness: every native causal LM shrinks to
a tiny config under the parameter bound, native non-causal classes and remote code are refused with the reason, and
the trickiest ones pass the CPU self-check (load, forward, generate, train) here; all of them in the slow test.

The full self-check's numbers are in bench/README.md ("Real configs: CPU self-check").
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import transformers

from compat.native import causal_lm_problem, registry_of, remote_code_verdict
from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Status
from compat.settings import get_settings
from service.validation import InvalidInput, check_config
from worker.build.tiny_config import count_params, shrink
from worker.catalog.corpus_models import CORPUS_DIR
from worker.run.process.devices import resolve_device
from worker.run.runner.runner import run_architecture

DATA = Path(__file__).resolve().parents[2] / "data"
CORPUS = CORPUS_DIR
SYNTHETIC = DATA / "synthetic_configs"
ROWS = json.loads((CORPUS / "index.json").read_text(encoding="utf-8"))["files"]
REGISTRY = registry_of(transformers)
# The default suite's self-check: longrope (Phi-3.5), MLA + yarn + MoE (DeepSeek-V3), sinks + yarn + MoE
# (gpt-oss), Mamba/MoE/attention with NaN/Infinity in its config (synthetic Nemotron-H), Jamba's hybrid.
TRICKIEST = ("phi3_5_mini_instruct.json", "deepseek_v3.json", "gpt_oss_120b.json", "jamba_reduced.json")


def _config(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _kind(cfg: dict) -> str:
    if remote_code_verdict(cfg, REGISTRY).remote_code:
        return "remote"
    return "causal" if causal_lm_problem(cfg, REGISTRY) is None else "not_causal"


def _entry(cfg: dict, name: str | None = None) -> ArchitectureEntry:
    return ArchitectureEntry(name=name or cfg["architectures"][0], model_type=cfg["model_type"], rank=1, config=cfg)


def _rows(kind: str) -> list[dict]:
    return [r for r in ROWS if _kind(_config(CORPUS / r["file"])) == kind]


def test_the_corpus_has_every_kind() -> None:
    kinds = {k: len(_rows(k)) for k in ("causal", "not_causal", "remote")}
    assert kinds["causal"] >= 55 and kinds["not_causal"] >= 3 and kinds["remote"] >= 10, kinds


@pytest.mark.parametrize("row", _rows("causal"), ids=lambda r: r["file"])
def test_native_config_shrinks_under_the_parameter_bound(row: dict) -> None:
    cfg = _config(CORPUS / row["file"])
    tiny = shrink(_entry(cfg))  # raises on an invalid tiny config or one over the bound
    n = count_params(tiny)
    assert 0 < n <= get_settings().max_tiny_params
    assert tiny.architectures == [cfg["architectures"][0]]


@pytest.mark.parametrize("row", _rows("not_causal"), ids=lambda r: r["file"])
def test_native_class_that_is_no_causal_lm_is_refused_naming_architectures(row: dict) -> None:
    """A multimodal wrapper (Llama4ForConditionalGeneration...) is refused at submission, and the message names the
    model type's causal LM; that class, when there is one, builds from the same config's text part."""
    cfg = _config(CORPUS / row["file"])
    with pytest.raises(InvalidInput) as info:
        check_config(cfg, 10**13)
    assert info.value.field == "architectures" and "not a causal-LM class" in info.value.message
    causal = REGISTRY.causal_lm.get(cfg["model_type"])
    if causal is not None:
        assert causal in info.value.message
        assert count_params(shrink(_entry(cfg, causal))) <= get_settings().max_tiny_params


@pytest.mark.parametrize("row", _rows("remote"), ids=lambda r: r["file"])
def test_remote_code_config_is_refused_with_the_reason(row: dict) -> None:
    cfg = _config(CORPUS / row["file"])
    verdict = remote_code_verdict(cfg, REGISTRY)
    assert verdict.field in ("model_type", "architectures") and "not" in (verdict.reason or "")
    with pytest.raises(InvalidInput) as info:
        check_config(cfg, 10**13)
    assert info.value.field == verdict.field
    # A config with no model_type at all (an old remote-code Qwen) is refused for that first.
    assert ("trust_remote_code" in info.value.message) if cfg.get("model_type") else "model_type" in info.value.message


def test_native_classes_with_an_auto_map_are_native_and_say_the_auto_map_was_ignored() -> None:
    # The four (Phi-3.5-mini, Phi-4-mini, DeepSeek-V3, Nemotron-H) were refused as remote code.
    for name in ("phi3_5_mini_instruct.json", "phi4_mini_instruct.json", "deepseek_v3.json",
                 "nemotron3_nano_30b_a3b.json"):
        cfg = _config(CORPUS / name)
        assert "auto_map" in cfg
        verdict = remote_code_verdict(cfg, REGISTRY)
        assert not verdict.remote_code and verdict.notes and "auto_map ignored" in verdict.notes[0], name


@pytest.fixture(scope="module")
def cpu():
    return resolve_device("cpu")


def _self_check(cfg: dict, cpu) -> list:  # noqa: ANN001 - a Device
    return run_architecture(_entry(cfg), cpu, DEFAULT_CHECKS)


@pytest.mark.parametrize("name", TRICKIEST)
def test_trickiest_real_configs_pass_the_cpu_self_check(name: str, cpu) -> None:  # noqa: ANN001
    recs = _self_check(_config(CORPUS / name), cpu)
    assert [(str(r.check), str(r.status)) for r in recs] == [(str(c), "pass") for c in DEFAULT_CHECKS], \
        [(r.check, r.status, r.reason) for r in recs]


def test_non_finite_config_keeps_infinity_and_passes_the_cpu_self_check(cpu) -> None:  # noqa: ANN001
    cfg = _config(SYNTHETIC / "nemotron_h_nonfinite.json")
    tiny = shrink(_entry(cfg))
    assert tiny.time_step_limit[1] == math.inf and math.isnan(tiny.compat_synthetic_nan)
    recs = _self_check(cfg, cpu)
    assert {str(r.status) for r in recs} == {"pass"}, [(r.check, r.status, r.reason) for r in recs]


@pytest.mark.slow
@pytest.mark.parametrize("row", _rows("causal"), ids=lambda r: r["file"])
def test_every_native_config_passes_the_cpu_self_check(row: dict, cpu) -> None:  # noqa: ANN001
    recs = _self_check(_config(CORPUS / row["file"]), cpu)
    bad = [(str(r.check), str(r.status), r.reason) for r in recs if r.status != Status.PASS]
    assert not bad, bad
