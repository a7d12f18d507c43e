"""The fine-tuning checks' hyper-parameters (LoRA's rank, alpha and per-model targets; SFT's steps): the one place the
checks, their CPU references and the `compat repro` scripts read them, light to import (no peft, trl, datasets).
"""

from __future__ import annotations

# LoRA hyper-parameters: small rank, no dropout (so the device and CPU runs draw no random numbers).
LORA_RANK, LORA_ALPHA = 4, 8

# Where discovery finds no linear layer under an attention module: the projections to adapt, by model_type, matched
# as peft matches target_modules names (the module name equals the entry or ends with "." + entry;
# peft/tuners/tuners_utils.py check_target_module_exists). Each entry says why.
LORA_TARGETS: dict[str, list[str]] = {
    # Attention-free state-space mixers: their input-side projections. peft 0.21.2 refuses conv1d and out_proj on
    # Mamba-based models ("Module 'out_proj' is incompatible with Mamba-based models ... Incompatible modules:
    # {'conv1d', 'out_proj'}", peft/tuners/tuners_utils.py).
    "mamba": ["in_proj", "x_proj", "dt_proj"],
    "falcon_mamba": ["in_proj", "x_proj", "dt_proj"],
    "mamba2": ["in_proj"],
    # RWKV's time-mixing block is its attention: key/value/receptance/output.
    "rwkv": ["key", "value", "receptance", "output"],
}

SFT_STEPS = 2  # the number
