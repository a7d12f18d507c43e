"""The fine-tuning checks' repro scripts: fsdp/tp as a torchrun script, lora/sft as the single-process one plus
their blocks; each is valid Python, carries the sweep's settings, and mixing the two kinds is refused."""

from __future__ import annotations

import pytest
from transformers import LlamaConfig

from compat.results import Check
from worker.run.repro.repro_finetune import ReproMixError, finetune_repro

CONFIG = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                     num_hidden_layers=2, vocab_size=128).to_dict()


def test_fsdp_and_tp_reproduce_with_torchrun() -> None:
    script = finetune_repro("LlamaForCausalLM", "neuron", CONFIG, checks=[Check.FSDP, Check.TP])
    compile(script, "repro.py", "exec")
    assert "torchrun --nproc-per-node 2" in script
    assert 'backend="neuron" if KIND == "neuron" else "gloo"' in script
    assert "fully_shard(model, mesh=mesh)" in script and 'DistributedConfig(tp_plan="auto")' in script


def test_lora_and_sft_extend_the_single_process_script() -> None:
    script = finetune_repro("LlamaForCausalLM", "cpu", CONFIG, checks=[Check.LORA, Check.SFT])
    compile(script, "repro.py", "exec")
    assert "CHECKS = ['lora', 'sft']" in script
    assert "LoraConfig(r=4, lora_alpha=8" in script and "SFTTrainer(" in script
    assert "torchrun" not in script


def test_default_checks_keep_the_plain_script() -> None:
    script = finetune_repro("LlamaForCausalLM", "cpu", CONFIG, checks=[Check.FORWARD])
    assert "peft" not in script and "CHECKS = ['forward']" in script


def test_mixing_ranks_and_single_process_checks_is_refused() -> None:
    with pytest.raises(ReproMixError):
        finetune_repro("LlamaForCausalLM", "cpu", CONFIG, checks=[Check.FSDP, Check.LORA])
