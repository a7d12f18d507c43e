"""The CPU side of every check: fp32 reference runs (twice), the fp64 golden run, the policy-precision reference.

Also records the architecture's op trace, and emulates the device's numerics policy on CPU (Bf16MatmulMode). Everything here runs on CPU; a failure here is ``reference_fail``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoModelForCausalLM, GenerationConfig

from worker.judge import judge
from worker.run import inputs as input_table
from worker.run.optrace import OpRecorder

BATCH, SEQ = 2, 16  # fixed forward inputs: small enough for tiny models, long enough to exercise masking/rope
PROMPT_LEN, NEW_TOKENS = 8, 32  # greedy generation: 32 new tokens (the number)
LR = 1e-3  # the AdamW step of the train check (torch.optim.AdamW default)
MAX_INPUT_ID = 1000  # tiny vocabularies are ~1k; stay below so ids are valid everywhere


class ReferenceFailure(RuntimeError):
    """The CPU reference itself failed: a harness or Transformers problem, never blamed on the device."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_inputs(vocab_size: int, seed: int, config: object | None = None) -> dict[str, torch.Tensor]:
    """Fixed forward/train inputs (2 x 16 token ids), train labels and a generation prompt (1 x 8), from ``seed``.

    Shapes follow the architecture's entry in worker/inputs.py (e.g. MusicGen: one row per codebook per sample)."""
    spec = input_table.spec_for(config)
    rows = input_table.rows_per_sample(spec, config)
    gen = torch.Generator().manual_seed(seed)
    high = max(2, min(vocab_size, MAX_INPUT_ID))
    ids = torch.randint(1, high, (BATCH * rows, SEQ), generator=gen)
    prompt = torch.randint(1, high, (rows, PROMPT_LEN), generator=gen)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "prompt": prompt,
              "labels": input_table.train_labels(spec, ids, config)}
    if spec.train_pixel_values:
        inputs["pixel_values"] = input_table.pixel_values(config, BATCH, gen)
    return inputs


def greedy_token_ids(model_config: object | None = None) -> dict[str, Any]:
    """The token ids of the greedy GenerationConfig: no eos (so both sides produce exactly NEW_TOKENS), pad 0,
    plus the model's own ids that its generate() needs (worker/inputs.py generation_fields)."""
    fields: dict[str, Any] = {"pad_token_id": 0, "eos_token_id": None, "bos_token_id": None}
    for name in input_table.spec_for(model_config).generation_fields:
        fields[name] = getattr(model_config, name)
    return fields


def greedy_config(model_config: object | None = None) -> GenerationConfig:
    # A fresh config: no sampling, no beam search. num_return_sequences explicit: MusicGen's own generate() reads it
    # without the generic path's default.
    return GenerationConfig(do_sample=False, num_beams=1, num_return_sequences=1, max_new_tokens=NEW_TOKENS,
                            min_new_tokens=NEW_TOKENS, **greedy_token_ids(model_config))


def model_class_for(path: Path) -> type:
    """The checkpoint's own class (config.architectures[0]); text sub-configs such as Emu3TextConfig are not in
    the AutoModelForCausalLM mapping, and users load those models by class name anyway."""
    try:
        name = (json.loads((Path(path) / "config.json").read_text()).get("architectures") or [None])[0]
    except (OSError, ValueError):
        name = None
    cls = getattr(transformers, name, None) if isinstance(name, str) else None
    return cls if cls is not None and hasattr(cls, "from_pretrained") else AutoModelForCausalLM


def load_model(path: Path, device_map: str = "cpu") -> torch.nn.Module:
    """from_pretrained the way users do: safetensors only, never remote code, fp32."""
    model = model_class_for(path).from_pretrained(path, dtype=torch.float32, device_map=device_map,
                                                 use_safetensors=True, trust_remote_code=False)
    model.eval()
    return model


def forward_logits(model: torch.nn.Module, inputs: dict[str, torch.Tensor], device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        out = model(input_ids=inputs["input_ids"].to(device), attention_mask=inputs["attention_mask"].to(device),
                    use_cache=False)
    return out.logits.detach().to("cpu", torch.float64 if out.logits.dtype == torch.float64 else torch.float32)


def greedy(model: torch.nn.Module, prompt: torch.Tensor, device: str = "cpu") -> tuple[list[int], list[float]]:
    """Greedy new tokens and, per step, the top-1 minus top-2 logit margin."""
    model.generation_config = greedy_config(model.config)
    with torch.no_grad():
        out = model.generate(prompt.to(device), attention_mask=torch.ones_like(prompt).to(device),
                             return_dict_in_generate=True, output_logits=True)
    # Codebook decoders return (batch, codebooks, len) with the delay pattern's pads stripped (MusicGen drops its
    # prompt's first position): the new tokens are the last len(logits) of the first row (sample 0, codebook 0).
    sequences = out.sequences.reshape(-1, out.sequences.shape[-1])
    tokens = sequences[0, sequences.shape[-1] - len(out.logits):].tolist()
    margins = []
    for step in out.logits:
        top2 = step[0].detach().to("cpu", torch.float64).topk(2).values
        margins.append(float(top2[0] - top2[1]))
    return tokens, margins


def train_step(model: torch.nn.Module, inputs: dict[str, torch.Tensor], device: str = "cpu",
               ) -> dict[str, torch.Tensor]:
    """Loss, flattened gradients and updated parameters after one AdamW step (eval mode: dropout off, so RNG
    streams that differ between devices cannot make the comparison flaky; worker/inputs.py names the models that
    refuse backward in eval mode, trained in train mode with their tiny configs' dropouts at 0)."""
    spec = input_table.spec_for(model.config)
    model.zero_grad(set_to_none=True)
    ids = inputs["input_ids"].to(device)
    labels = inputs.get("labels", inputs["input_ids"]).to(device)
    extra = {}
    if "pixel_values" in inputs:
        dtype = next(model.parameters()).dtype  # the fp64 golden copy takes fp64 images
        extra["pixel_values"] = inputs["pixel_values"].to(device, dtype)
    was_training = model.training
    model.train(spec.train_mode or was_training)
    try:
        loss = model(input_ids=ids, attention_mask=inputs["attention_mask"].to(device), labels=labels,
                     use_cache=False, **extra).loss
        loss.backward()
    finally:
        model.train(was_training)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).detach().reshape(-1).cpu()
                       for p in params])
    torch.optim.AdamW(params, lr=LR).step()
    updated = torch.cat([p.detach().reshape(-1).cpu() for p in params])
    return {"loss": loss.detach().cpu().reshape(1), "grads": grads, "params": updated}


# neuronx-cc's default `--auto-cast matmult`: TensorEngine (matrix-multiply family) ops take bf16 operands and
# accumulate in fp32. Op -> positions of its two operands.
MATMUL_OPERANDS: dict[str, tuple[int, int]] = {
    "aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::addmm": (1, 2), "aten::baddbmm": (1, 2),
    "aten::addbmm": (1, 2), "aten::matmul": (0, 1), "aten::linear": (0, 1), "aten::convolution": (0, 1),
    "aten::_convolution": (0, 1), "aten::dot": (0, 1), "aten::mv": (0, 1), "aten::addmv": (1, 2),
}


class Bf16MatmulMode(TorchDispatchMode):
    """CPU emulation of the ``bf16_matmul`` policy: fp32 matmul operands rounded to bf16, product in fp32.

    Rounding operands then multiplying in fp32 is exactly "bf16 inputs, fp32 accumulation" (a bf16*bf16 product is
    exact in fp32), so the reference carries the same rounding the policy allows and no more; outputs stay fp32,
    unlike CPU autocast, whose bf16 outputs break models that mix dtypes (index_add, scatter).
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        pos = MATMUL_OPERANDS.get(func._schema.name)
        if pos is not None:
            args = list(args)
            for i in pos:
                if i < len(args) and isinstance(args[i], torch.Tensor) and args[i].dtype == torch.float32:
                    args[i] = args[i].to(torch.bfloat16).to(torch.float32)
        return func(*args, **(kwargs or {}))


def policy_mode(policy: str) -> contextlib.AbstractContextManager:
    """The CPU emulation of ``policy`` (nothing for fp32): run the reference under it to match the device's rounding."""
    return _policy_mode(policy)


def _policy_mode(policy: str) -> contextlib.AbstractContextManager:
    if policy not in judge.REDUCED_POLICIES:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    # The math SDPA backend spells attention as bmm/baddbmm, so its matmuls are rounded like every other one.
    stack.enter_context(sdpa_kernel(SDPBackend.MATH))
    stack.enter_context(Bf16MatmulMode())
    return stack


@dataclass
class Reference:
    """Everything the CPU computes for one tiny checkpoint; device checks are judged against it."""

    path: Path
    policy: str
    seed: int
    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    logits: torch.Tensor  # fp32 CPU run
    policy_logits: torch.Tensor  # CPU run under the device's policy (Bf16MatmulMode for bf16_matmul)
    golden_logits: torch.Tensor | None  # fp64 CPU run; None when the model cannot run in fp64
    determinism: judge.Verdict
    recorder: OpRecorder = field(default_factory=OpRecorder)
    _golden_model: torch.nn.Module | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def ops(self) -> list[str]:
        return self.recorder.ops

    def traced(self, fn: Callable[[], Any]) -> Any:
        with self.recorder:
            return fn()

    @property
    def precise_logits(self) -> torch.Tensor | None:
        """The most precise CPU logits to measure errors against: the fp64 run; where a kernel lacks fp64 (MoE
        ``_grouped_mm``), the fp32 run under a reduced policy (still finer than bf16 matmuls), else None."""
        return self._precise(self.golden_logits, self.logits)

    def _precise(self, golden: Any, fp32: Any) -> Any:
        """The one rule for what errors are measured against: the fp64 result; where fp64 cannot run, the fp32
        result under a reduced policy (finer than its bf16 matmuls; the policy run judged against itself would have
        error 0 and make every bf16 rounding a mismatch); else None (the judge then uses the reference itself)."""
        if golden is not None:
            return golden
        return fp32 if self.policy in judge.REDUCED_POLICIES else None

    def logit_bound(self) -> float:
        return judge.logit_error_bound(self.policy_logits, self.precise_logits, self.policy)

    def generation(self) -> tuple[list[int], list[float]]:
        if "gen" not in self._cache:
            try:
                self._cache["gen"] = self.traced(lambda: greedy(self.model, self.inputs["prompt"]))
            except Exception as exc:
                raise ReferenceFailure(f"reference generate failed: {type(exc).__name__}: {exc}") from exc
        return self._cache["gen"]

    def training(self) -> dict[str, dict[str, torch.Tensor] | None]:
        """fp32, policy-precision and fp64 results of one AdamW step, each on a fresh copy of the weights."""
        if "train" not in self._cache:
            try:
                fp32 = self.traced(lambda: train_step(copy.deepcopy(self.model), self.inputs))
                if self.policy in judge.REDUCED_POLICIES:
                    with _policy_mode(self.policy):
                        pol = train_step(copy.deepcopy(self.model), self.inputs)
                else:
                    pol = fp32
            except Exception as exc:
                raise ReferenceFailure(f"reference train step failed: {type(exc).__name__}: {exc}") from exc
            gold = None
            if self._golden_model is not None:
                try:
                    gold = train_step(copy.deepcopy(self._golden_model), self.inputs)
                except Exception:  # noqa: BLE001 - fp64 is a nicety; judge falls back to the fp32 reference
                    gold = None
            self._cache["train"] = {"fp32": fp32, "policy": pol, "golden": gold,
                                    "precise": self._precise(gold, fp32)}
        return self._cache["train"]


def prepare_reference(path: Path, policy: str, seed: int) -> Reference:
    """Load on CPU, run forward twice (traced), run fp64 and policy precision; raise ReferenceFailure if it fails."""
    seed_everything(seed)
    try:
        model = load_model(path, "cpu")
    except Exception as exc:
        raise ReferenceFailure(f"reference load failed: {type(exc).__name__}: {exc}") from exc
    vocab = int(getattr(model.config.get_text_config(), "vocab_size", 0) or MAX_INPUT_ID)
    inputs = make_inputs(vocab, seed, model.config)
    recorder = OpRecorder()
    try:
        with recorder:
            run1 = forward_logits(model, inputs)
        run2 = forward_logits(model, inputs)
    except Exception as exc:
        raise ReferenceFailure(f"reference forward failed: {type(exc).__name__}: {exc}") from exc
    golden_model: torch.nn.Module | None = None
    golden = None
    try:
        golden_model = copy.deepcopy(model).to(torch.float64)
        golden = forward_logits(golden_model, inputs)
        if not bool(torch.isfinite(golden).all()):
            golden, golden_model = None, None
    except Exception:  # noqa: BLE001 - some kernels lack fp64; judge then uses the fp32 reference alone
        golden, golden_model = None, None
    policy_logits = run1
    if policy in judge.REDUCED_POLICIES:
        try:
            with _policy_mode(policy):
                policy_logits = forward_logits(model, inputs).float()
        except Exception as exc:
            raise ReferenceFailure(f"reference {policy} forward failed: {type(exc).__name__}: {exc}") from exc
    verdict = judge.reference_determinism(run1, run2, golden)
    return Reference(path=path, policy=policy, seed=seed, model=model, inputs=inputs, logits=run1,
                     policy_logits=policy_logits, golden_logits=golden, determinism=verdict,
                     recorder=recorder, _golden_model=golden_model)
