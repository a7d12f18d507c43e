"""Per-architecture input table: how to shape input ids, labels and extras for models whose forward differs.

Data, like worker/build/overrides.py is for configs: the checks build every input through ``spec_for``/``train_labels``,
so an architecture with a different forward signature gets one table entry, not special cases in the checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class InputSpec:
    """How one architecture wants its inputs. The default (all fields unset) is a plain text causal LM."""

    # Config field K such that input_ids are (batch * K, seq) rows (MusicGen's codebooks); None = (batch, seq).
    rows_per_sample: str | None = None
    # "ids": labels = input_ids (shifted inside the model); "codebooks": (batch, seq, K) labels, K = rows_per_sample.
    labels: str = "ids"
    # Config fields copied into the greedy GenerationConfig (a fresh one carries none of the model's ids).
    generation_fields: tuple[str, ...] = ()
    # The model refuses backward in eval mode; trained in train mode (the tiny configs have every dropout at 0, so
    # train mode computes the same function as eval and stays deterministic across devices).
    train_mode: bool = False
    # The loss is defined over image + text positions: the train check feeds seeded pixel_values.
    train_pixel_values: bool = False


# Keyed by model_type (then class name); each entry says why the default does not fit.
INPUTS: dict[str, InputSpec] = {
    # The audio decoder reads (batch * num_codebooks, seq) codebook ids and (batch, seq, num_codebooks) labels;
    # generate() builds its delay pattern from decoder_start_token_id and strips pad_token_id (= vocab_size, a
    # codebook pad outside the vocabulary) from its output, so both must come from the model's config.
    "musicgen_decoder": InputSpec(rows_per_sample="num_codebooks", labels="codebooks",
                                  generation_fields=("decoder_start_token_id", "pad_token_id")),
    "musicgen_melody_decoder": InputSpec(rows_per_sample="num_codebooks", labels="codebooks",
                                         generation_fields=("decoder_start_token_id", "pad_token_id")),
    # GIT's loss slices off the image-token positions (logits[:, image_patch_tokens:]); text-only input leaves none.
    "git": InputSpec(train_pixel_values=True),
    # ReformerModel asserts self.training before any backward (its reversible layers recompute activations).
    # Train mode also reseeds its LSH hashing from torch.seed(); the harness's 16-token inputs are shorter than
    # the 64-token LSH chunk, so Reformer attends fully and the step stays deterministic.
    "reformer": InputSpec(train_mode=True),
}

DEFAULT = InputSpec()


def spec_for(config: object) -> InputSpec:
    """The table's entry for a model config, by model_type first, then by class name; the default otherwise."""
    model_type = str(getattr(config, "model_type", "") or "")
    names = getattr(config, "architectures", None) or [""]
    return INPUTS.get(model_type) or INPUTS.get(str(names[0])) or DEFAULT


def rows_per_sample(spec: InputSpec, config: object) -> int:
    """How many input_ids rows one sample takes (1 for text models)."""
    if spec.rows_per_sample is None:
        return 1
    return int(getattr(config, spec.rows_per_sample))


def train_labels(spec: InputSpec, ids: torch.Tensor, config: object) -> torch.Tensor:
    """Labels for the train check from the (batch * K, seq) ids: the ids themselves, or (batch, seq, K) codebooks."""
    if spec.labels == "ids":
        return ids
    if spec.labels == "codebooks":
        k = rows_per_sample(spec, config)
        return ids.reshape(-1, k, ids.shape[-1]).transpose(1, 2).contiguous()
    raise ValueError(f"unknown labels kind {spec.labels!r}")


def pixel_values(config: object, batch: int, generator: torch.Generator) -> torch.Tensor:
    """Seeded (batch, channels, size, size) images for the config's vision tower."""
    vision = config.vision_config  # type: ignore[attr-defined]
    size = int(vision.image_size)
    return torch.randn(batch, int(vision.num_channels), size, size, generator=generator)
