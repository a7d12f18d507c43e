"""The ``sft`` check's computation: trl's SFTTrainer for two steps on a tiny in-memory dataset built in code.

The same script runs on the device (``use_cpu=False``: Trainer picks the device as on real Trainium) and on the
CPU reference (``use_cpu=True``); the result is the loss curve Trainer logs (one loss per step).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from accelerate.state import AcceleratorState
from datasets import Dataset
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

from worker.run.reference.finetune_params import SFT_STEPS
from worker.run.reference.reference import BATCH, LR, load_model

PAD_TOKEN = "<pad>"  # token id 0, as the generate check's pad id


def tiny_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over ``vocab_size`` ids built in code (no Hub): SFTTrainer wants a tokenizer for its
    pad token even when the dataset arrives tokenized (trl/trainer/sft_trainer.py: a ``processing_class`` is loaded
    from the model id when none is given, and the collator pads with ``tokenizer.pad_token``)."""
    vocab = {PAD_TOKEN: 0, **{f"t{i}": i for i in range(1, vocab_size)}}
    tok = Tokenizer(WordLevel(vocab, unk_token=PAD_TOKEN))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD_TOKEN, eos_token=PAD_TOKEN,
                                   unk_token=PAD_TOKEN)


def sft_dataset(input_ids: torch.Tensor) -> Dataset:
    """The rows of the checks' fixed inputs as an already-tokenized dataset: trl skips its own tokenization when
    an ``input_ids`` column exists (sft_trainer.py ``_prepare_dataset``: ``is_processed``)."""
    return Dataset.from_dict({"input_ids": input_ids.tolist()})


@contextlib.contextmanager
def fresh_accelerate_state() -> Iterator[None]:
    """Start from a fresh Accelerate state, reset again afterwards: PartialState is a process-wide singleton, and
    the device run and the CPU reference run share this process.

    The device is not named to Accelerate: the simulated device's ``torch_neuronx`` module
    (neuron_backend/simulated_torch_neuronx.py) makes accelerate 1.15.0 ``state.py:750`` pick ``neuron`` and
    transformers 5.23.0 ``training_args.py:1937`` pick ``neuron:0`` by themselves, as on real Trainium, and
    ``use_cpu=True`` picks the CPU for the reference."""
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        yield
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def sft_config(out_dir: Path, *, use_cpu: bool, seed: int, pad_to_multiple_of: int | None = None) -> SFTConfig:
    """TRL's defaults except what the comparison needs: a fixed 2-step run, one loss logged per step, a constant
    learning rate, fp32 (``bf16`` would default on: trl/trainer/base_config.py), no activation checkpointing (TRL's
    ``gradient_checkpointing`` defaults on; not every architecture supports it, and it is a memory saver, not what
    is measured; spelled by its transformers 5.23 name, of which ``gradient_checkpointing`` is the deprecated alias,
    transformers/training_args.py ``__post_init__``), nothing
    saved or reported. The optimizer stays Transformers' default (``adamw_torch_fused`` for torch >= 2.8,
    transformers/training_args.py) and the padding TRL picks for the device (``pad_to_multiple_of`` 128 on
    Neuron, trl/trainer/sft_config.py), unless ``pad_to_multiple_of`` is given: the CPU reference takes the
    device run's, so both compute the same padded batch (``device_padding``)."""
    return SFTConfig(
        output_dir=str(out_dir), use_cpu=use_cpu, max_steps=SFT_STEPS, per_device_train_batch_size=BATCH,
        learning_rate=LR, lr_scheduler_type="constant", warmup_steps=0, logging_steps=1, save_strategy="no",
        report_to="none", bf16=False, fp16=False, activation_checkpointing=False, seed=seed, data_seed=seed,
        dataloader_num_workers=0, disable_tqdm=True, max_length=None, packing=False,
        # None: TRL's own choice for the device it trains on (its default "auto"); passing None would turn it off
        **({} if pad_to_multiple_of is None else {"pad_to_multiple_of": pad_to_multiple_of}),
    )


def device_padding(device: str) -> int | None:
    """The ``pad_to_multiple_of`` TRL picks when it trains on ``device`` (1.16.0: 128 on Neuron, none elsewhere,
    trl/trainer/sft_config.py ``__post_init__``), read from TRL itself rather than restated. Padding changes the
    loss of a model that does not mask pads out (CpmAnt: 24.50 unpadded vs 25.78 padded to 128, on the CPU), so
    the reference must pad as the device run does or the device is blamed for TRL's choice."""
    if torch.device(device).type == "cpu":
        return None
    with tempfile.TemporaryDirectory(prefix="compat-sft-") as tmp, fresh_accelerate_state():
        return sft_config(Path(tmp), use_cpu=False, seed=0).pad_to_multiple_of


def sft_losses(path: Path, inputs: dict[str, torch.Tensor], device: str, *, seed: int, reference: bool,
               pad_to_multiple_of: int | None = None) -> torch.Tensor:
    """Run SFTTrainer for SFT_STEPS and return the logged training loss of each step: the CPU reference with
    ``use_cpu=True`` (and the device run's padding, ``pad_to_multiple_of``), or the device run with
    ``use_cpu=False`` on the device Trainer and Accelerate pick themselves (checked against ``device``)."""
    vocab = int(inputs["input_ids"].max()) + 1
    with tempfile.TemporaryDirectory(prefix="compat-sft-") as tmp, fresh_accelerate_state():
        args = sft_config(Path(tmp), use_cpu=reference, seed=seed, pad_to_multiple_of=pad_to_multiple_of)
        model = load_model(path, "cpu")  # Trainer places it on args.device, as for any user
        trainer = SFTTrainer(model=model, args=args, train_dataset=sft_dataset(inputs["input_ids"]),
                             processing_class=tiny_tokenizer(vocab))
        trainer.train()
        losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
        where = next(trainer.model.parameters()).device.type
        del trainer
    if len(losses) != SFT_STEPS:
        raise RuntimeError(f"SFTTrainer logged {len(losses)} losses for {SFT_STEPS} steps")
    want = "cpu" if reference else torch.device(device).type
    if where != want:
        raise RuntimeError(f"SFTTrainer trained on {where}, not on {want}")
    return torch.tensor(losses, dtype=torch.float64)
