"""The per-architecture input table (worker/run/reference/inputs.py) against the real Transformers models it describes.

Tiny models built in-process (no checkpoint, no pool) so the file stays within a few seconds.
"""

from __future__ import annotations

import torch
from transformers import (
    LlamaConfig,
    MusicgenDecoderConfig,
    MusicgenForCausalLM,
    ReformerConfig,
    ReformerModelWithLMHead,
)

from compat.results import Status
from worker.build.tiny_config import TinyConfigError
from worker.catalog.catalog import registry_entries
from worker.run.reference import inputs as table
from worker.run.reference.reference import BATCH, NEW_TOKENS, PROMPT_LEN, SEQ, greedy, make_inputs, train_step
from worker.run.runner.runner import _build_failure


def _musicgen(codebooks: int) -> MusicgenForCausalLM:
    torch.manual_seed(0)
    cfg = MusicgenDecoderConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64,
                                vocab_size=64, num_codebooks=codebooks, pad_token_id=64, bos_token_id=64,
                                decoder_start_token_id=64)
    return MusicgenForCausalLM(cfg).eval()


def test_text_models_get_the_default_spec_and_plain_shapes() -> None:
    cfg = LlamaConfig(vocab_size=128)
    assert table.spec_for(cfg) == table.DEFAULT
    inp = make_inputs(128, 0, cfg)
    assert inp["input_ids"].shape == (BATCH, SEQ) and inp["prompt"].shape == (1, PROMPT_LEN)
    assert torch.equal(inp["labels"], inp["input_ids"]) and "pixel_values" not in inp


def test_codebook_labels_regroup_rows_per_sample() -> None:
    cfg = MusicgenDecoderConfig(num_codebooks=4)
    spec = table.spec_for(cfg)
    inp = make_inputs(64, 0, cfg)
    ids, labels = inp["input_ids"], inp["labels"]
    assert ids.shape == (BATCH * 4, SEQ) and labels.shape == (BATCH, SEQ, 4) and inp["prompt"].shape == (4, PROMPT_LEN)
    # Row b*K + k of the ids is codebook k of sample b (MusicGen's reshape(-1, K, seq)).
    for b in range(BATCH):
        for k in range(4):
            assert torch.equal(labels[b, :, k], ids[b * 4 + k])
    assert torch.equal(table.train_labels(spec, ids, cfg), labels)


def test_musicgen_train_step_with_several_codebooks_matches_a_manual_loss() -> None:
    model = _musicgen(4)
    inp = make_inputs(64, 0, model.config)
    got = train_step(model, inp)
    # The model's loss is the mean over codebooks of next-token cross-entropy; recompute it from the logits.
    torch.manual_seed(0)
    fresh = _musicgen(4)
    with torch.no_grad():
        logits = fresh(input_ids=inp["input_ids"]).logits.reshape(BATCH, 4, SEQ, -1)
    want = sum(torch.nn.functional.cross_entropy(logits[:, k].reshape(-1, 64), inp["labels"][..., k].reshape(-1))
               for k in range(4)) / 4
    # fp32 CPU on identical weights and inputs: only summation-order noise, far below 1e-5.
    assert abs(float(got["loss"]) - float(want)) < 1e-5
    assert bool(torch.isfinite(got["grads"]).all()) and float(got["grads"].abs().sum()) > 0


def test_musicgen_greedy_returns_the_new_tokens_with_their_margins() -> None:
    model = _musicgen(1)
    inp = make_inputs(64, 0, model.config)
    tokens, margins = greedy(model, inp["prompt"])
    assert len(tokens) == len(margins) == NEW_TOKENS
    assert all(0 <= t < 64 for t in tokens)  # the codebook pad (64) is stripped, never returned as a token


def test_reformer_trains_in_train_mode_and_is_left_in_eval() -> None:
    torch.manual_seed(0)
    cfg = ReformerConfig(is_decoder=True, axial_pos_embds=False, hidden_size=32, feed_forward_size=64,
                         attention_head_size=16, num_attention_heads=2, attn_layers=["local", "lsh"],
                         vocab_size=64, hidden_dropout_prob=0.0, local_attention_probs_dropout_prob=0.0,
                         lsh_attention_probs_dropout_prob=0.0)
    model = ReformerModelWithLMHead(cfg).eval()
    assert table.spec_for(cfg).train_mode
    first = train_step(model, make_inputs(64, 0, cfg))
    assert not model.training and bool(torch.isfinite(first["loss"]).all())


def test_git_train_inputs_carry_images_of_the_vision_tower_size() -> None:
    entry = next(e for e in registry_entries() if e.name == "GitForCausalLM")
    from worker.build.tiny_config import shrink

    cfg = shrink(entry)
    inp = make_inputs(int(cfg.vocab_size), 0, cfg)
    size = cfg.vision_config.image_size
    assert inp["pixel_values"].shape == (BATCH, cfg.vision_config.num_channels, size, size)


def test_missing_optional_dependency_is_named_on_one_line() -> None:
    try:
        try:
            raise ImportError("\nTimmWrapperModel requires the timm library\n`pip install timm`.\n")
        except ImportError as inner:
            raise TinyConfigError("cannot instantiate Gemma3nForConditionalGeneration") from inner
    except TinyConfigError as exc:
        status, reason = _build_failure(exc)
    assert status == Status.HARNESS_ERROR and reason.startswith("missing package timm (pip install timm)")
    assert "\n" not in reason
    status, reason = _build_failure(TinyConfigError("bad\nconfig"))
    assert "missing package" not in reason and reason.endswith("TinyConfigError: bad config")
