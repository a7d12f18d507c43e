"""'Did you mean' for names that are not valid choices: close matches ignoring case, prefixes, never a dump of a
long list."""

from __future__ import annotations

from cli.suggest import close_matches, unknown
from cli.validate import architecture_key, unknown_architecture
from worker.catalog.names import registry_names

DEVICES = ["neuron", "cpu", "cuda", "mps", "xpu"]


def test_close_matches_ignore_case_and_put_the_exact_name_first() -> None:
    assert close_matches("CUDA", DEVICES)[0] == "cuda"
    assert close_matches("nueron", DEVICES) == ["neuron"]
    assert close_matches("zzz", DEVICES) == []


def test_a_prefix_or_part_is_matched_even_when_much_shorter() -> None:
    names = ["DiffLlamaForCausalLM", "LlamaForCausalLM", "Llama4ForCausalLM", "MllamaForCausalLM"]
    # Compared whole, "llama" is too short to resemble any of them (difflib ratio < 0.6): prefixes first.
    assert close_matches("llama", names) == ["LlamaForCausalLM", "Llama4ForCausalLM", "MllamaForCausalLM"]
    assert close_matches("llama", names, key=architecture_key)[0] == "LlamaForCausalLM"


def test_a_short_list_is_named_in_full_a_long_one_never() -> None:
    assert unknown("device", "tpu", DEVICES) == (
        "unknown device 'tpu'; did you mean xpu or cpu? valid devices: neuron, cpu, cuda, mps, xpu")
    names = registry_names()
    assert names is not None and len(names) > 100
    msg = unknown_architecture("LlamaForCausalLm", names)
    assert msg == (f"unknown architecture 'LlamaForCausalLm'; did you mean LlamaForCausalLM, MllamaForCausalLM or "
                   f"Llama4ForCausalLM? {len(names)} architectures known; list them with `compat catalog list`")
    assert sum(n in msg for n in names) <= 3 + 1  # "LlamaForCausalLM" is also inside "MllamaForCausalLM"


def test_the_shared_head_suffix_does_not_make_every_name_similar() -> None:
    names = registry_names()
    # Compared whole, "NopeForCausalLM" resembles OPT-, Doge-, OlmoeForCausalLM...: noise, not suggestions.
    assert "did you mean" not in unknown_architecture("NopeForCausalLM", names)
    assert "did you mean MixtralForCausalLM" in unknown_architecture("mixtral", names)
    assert "did you mean GPT2LMHeadModel" in unknown_architecture("gpt2", names)
    # A misspelt head still finds the model.
    assert "did you mean LlamaForCausalLM" in unknown_architecture("LlamaForCausalLn", names)


def test_no_choices_says_so() -> None:
    assert unknown("run id", "abc", [], plural="runs", max_listed=0) == "unknown run id 'abc'; no runs known"
    assert unknown("run id", "abd", ["abc"], plural="runs", max_listed=0) == (
        "unknown run id 'abd'; did you mean abc? 1 runs known")
