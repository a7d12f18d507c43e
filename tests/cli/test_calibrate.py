"""`compat calibrate`: bad input answers at once, the kept-disagreements file is checked, observed models find their
real configs, and a CI sample runs the command end to end (one agreement, one disagreement, one not judged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from cli.calibrate import NOTES_PATH, load_notes, real_configs
from cli.console import console
from neuron_backend.hardware import observations

runner = CliRunner()


@pytest.mark.parametrize(("args", "expect"), [
    (["calibrate", "--arch", "Phi3ForCausalLm"], "unknown observed architecture 'Phi3ForCausalLm'; did you mean "
                                                 "Phi3ForCausalLM or PhiForCausalLM?"),
    (["calibrate", "--arch", "MixtralForCausalLM"], "valid observed architectures: BloomForCausalLM, "),
    (["calibrate", "--device", "cpu"], "calibrate compares the neuron device with real Trainium observations"),
    (["calibrate", "--device", "tpu"], "valid devices:"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], expect: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], res.output


def test_the_shipped_kept_disagreements_name_observed_things_and_cited_sources(tmp_path: Path) -> None:
    evidence = observations.load()
    assert set(load_notes(NOTES_PATH, evidence)) == {"GPTNeoForCausalLM", "Phi3ForCausalLM"}
    bad = {"NopeForCausalLM": {"reason": "r", "source": "A_history"}}, \
        {"Phi3ForCausalLM": {"reason": "r", "source": "Z_nowhere"}}, \
        {"microsoft/phi-4": {"reason": "r", "source": "A_history", "check": "lora"}}
    for kept, why in zip(bad, ("neither an observed architecture", "needs a 'reason' and a 'source'",
                               "names check 'lora'"), strict=True):
        path = tmp_path / "notes.json"
        path.write_text(json.dumps({"kept": kept}))
        with pytest.raises(ValueError, match=why):
            load_notes(path, evidence)


def test_observed_models_find_their_exact_real_config(tmp_path: Path) -> None:
    configs = real_configs(observations.load())
    assert configs["microsoft/Phi-3.5-mini-instruct"][0] == "phi3_5_mini_instruct.json"
    assert configs["Qwen/Qwen3-8B"][1]["model_type"] == "qwen3"
    # The observations' own rule: an exact Hub id, so gpt2.json ("gpt2") is not openai-community/gpt2's.
    assert "openai-community/gpt2" not in configs
    assert real_configs(observations.load(), tmp_path) == {}  # no corpus: every class on its config defaults


def test_ci_sample_runs_the_command_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GPT-2 ran on real hardware and runs here; Phi-3 failed there with no recorded cause and runs here (a kept
    # disagreement); DeepSeek-MoE v1 is remote code, listed as not judged.
    monkeypatch.setattr(console, "width", 80)
    report = tmp_path / "calibration.json"
    res = runner.invoke(app, ["calibrate", "--arch", "GPT2LMHeadModel", "--arch", "Phi3ForCausalLM", "--arch",
                              "DeepseekForCausalLM", "--jobs", "1", "--json", str(report)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("calibrating neuron (bundled simulation, profile ") and "2 to run (load, forward), " \
        "1 not judged" in lines[0]
    # The table fits 80 columns; the log lines around it are never wrapped (a grep takes each whole).
    assert max(len(ln) for ln in lines if not ln.startswith(("calibrating", "[", "forward:", "disagrees:"))) <= 80
    assert any(ln.startswith("[2/2] calibrate neuron ") and "forward pass" in ln for ln in lines), res.output
    assert any(ln.startswith("forward: same result for the same cause on 1 of 2 observed architectures (50.0%); 1 "
                             "not counted: 1 not judged") for ln in lines), res.output
    disagrees = [ln for ln in lines if ln.startswith("disagrees: ")]
    assert len(disagrees) == 1 and disagrees[0].startswith(
        "disagrees: Phi3ForCausalLM forward: real hardware failed, real cause not recorded "
        "(microsoft/Phi-3.5-mini-instruct, microsoft/phi-4, source A HISTORY.tsv); the simulation ran it; kept: A's "
        "HISTORY.tsv rows"), res.output
    table = " ".join(res.output.split())
    assert "judged: Phi3ForCausalLM, microsoft/Phi-3.5-mini-instruct (phi3_5_mini_instruct.json)" in table
    assert "DeepseekForCausalLM not counted judged: not judged real: fail [aten::sort]" in table
    data = json.loads(report.read_text())
    assert [(r["target"]["architecture"], r["agrees"]) for r in data["rows"]] == [
        ("DeepseekForCausalLM", None), ("GPT2LMHeadModel", True), ("Phi3ForCausalLM", False)]
    assert {(r["architecture"], r["check"], r["status"]) for r in data["results"]} == {
        (a, c, "pass") for a in ("GPT2LMHeadModel", "Phi3ForCausalLM") for c in ("load", "forward")}
    assert data["agreement"] == [{"check": "forward", "strict": 1, "agrees": 1, "counted": 2, "different_cause": [],
                                  "cause_unknown": [], "not_counted": {
        "not judged (not in the installed Transformers, or remote code)": 1, "observed outcome unknown or partial": 0,
        "the simulation gave no verdict (reference_fail, harness_error or skipped)": 0},
        "line": data["agreement"][0]["line"]}]
