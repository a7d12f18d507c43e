"""The CPU side of every check: fp32 reference runs (twice), the fp64 golden run, the policy-precision reference.

Also records the architecture's op trace; the device's numerics policy is emulated by ``precision_mode``. Everything
here runs on CPU; a failure here is ``reference_fail``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig

from compat.results import Status
from worker.judge import judge
from worker.run.reference import inputs as input_table
from worker.run.reference import precision_mode
from worker.run.reference.optrace import OpRecorder
from worker.run.reference.precision_mode import policy_mode
from worker.run.reference.reference_cache import ReferenceCache, file_digest, key_for, tensors_spec

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

    Shapes follow the architecture's entry in worker/run/reference/inputs.py (e.g. MusicGen: one row per codebook per sample)."""
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
    plus the model's own ids that its generate() needs (worker/run/reference/inputs.py generation_fields)."""
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
    streams that differ between devices cannot make the comparison flaky; worker/run/reference/inputs.py names the models that
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
    # The on-disk reference cache (reference_cache.py), this checkpoint's key parts, and per part "hit" or "miss".
    disk: ReferenceCache | None = None
    key_parts: dict[str, Any] | None = None
    cache_status: dict[str, str] = field(default_factory=dict)

    @property
    def ops(self) -> list[str]:
        return self.recorder.ops

    def traced(self, fn: Callable[[], Any]) -> Any:
        with self.recorder:
            return fn()

    def _traced_part(self, fn: Callable[[], Any]) -> tuple[Any, list[str]]:
        """``fn()`` traced on its own recorder, its ops then added to the trace (the same order as tracing it on
        the shared recorder); the part's ops are returned to be cached with its result."""
        part = OpRecorder()
        try:
            with part:
                return fn(), part.ops
        finally:
            merge_ops(self.recorder, part.ops)

    def _lookup(self, part: str, params: dict[str, Any], tensors: tuple[str, ...],
                meta: tuple[str, ...] = ("ops",)) -> tuple[str | None, Any]:
        """(key, cached entry or None) for one part of the reference; (None, None) without a cache. An entry that
        lacks any of the named ``tensors`` or ``meta`` fields is a miss."""
        if self.disk is None or self.key_parts is None:
            return None, None
        key = key_for({**self.key_parts, "check": part, "params": params})
        hit = self.disk.get(key)
        if hit is not None and not (set(tensors) <= set(hit[0]) and set(meta) <= set(hit[1])):
            hit = None
        self.cache_status[part] = "hit" if hit is not None else "miss"
        return key, hit

    def lookup_part(self, part: str, params: dict[str, Any], tensors: tuple[str, ...],
                    meta: tuple[str, ...] = ()) -> tuple[str | None, Any]:
        """``_lookup`` for a part computed outside this module (the lora and sft references)."""
        return self._lookup(part, params, tensors, meta)

    def store_part(self, key: str | None, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Store a part under ``key`` (from ``lookup_part``). Only for a reference that passed its self-agreement
        rule, as the forward entry: a part is never cached beside a ``reference_fail``."""
        if key is not None and self.disk is not None and self.determinism.passed:
            self.disk.put(key, tensors, meta)

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
            params = {"prompt_len": PROMPT_LEN, "new_tokens": NEW_TOKENS,
                      "generation": greedy_token_ids(self.model.config)}
            key, hit = self._lookup("generate", params, ("tokens", "margins"))
            if hit is not None:
                tensors, meta = hit
                merge_ops(self.recorder, meta["ops"])
                self._cache["gen"] = (tensors["tokens"].tolist(), tensors["margins"].tolist())
                return self._cache["gen"]
            try:
                with torch.random.fork_rng(devices=[]):  # hit or miss, the device checks see the same RNG state
                    gen, ops = self._traced_part(lambda: greedy(self.model, self.inputs["prompt"]))
            except Exception as exc:
                raise ReferenceFailure(f"reference generate failed: {type(exc).__name__}: {exc}") from exc
            self._cache["gen"] = gen
            if key is not None and self.disk is not None:
                self.disk.put(key, {"tokens": torch.tensor(gen[0], dtype=torch.int64),
                                    "margins": torch.tensor(gen[1], dtype=torch.float64)}, {"ops": ops})
        return self._cache["gen"]

    def training(self) -> dict[str, dict[str, torch.Tensor] | None]:
        """fp32, policy-precision and fp64 results of one AdamW step, each on a fresh copy of the weights."""
        if "train" not in self._cache:
            key, hit = self._lookup("train", {"lr": LR, "golden": self._golden_model is not None},
                                    ("fp32.loss", "fp32.grads", "fp32.params"))
            if hit is not None:
                tensors, meta = hit
                merge_ops(self.recorder, meta["ops"])
                fp32, pol, gold = (_unflatten(tensors, k) for k in ("fp32", "policy", "golden"))
                fp32 = fp32 or {}  # never empty: the lookup requires its three tensors
                self._cache["train"] = {"fp32": fp32, "policy": pol or fp32, "golden": gold,
                                        "precise": self._precise(gold, fp32)}
                return self._cache["train"]
            with torch.random.fork_rng(devices=[]):  # hit or miss, the device checks see the same RNG state
                fp32, pol, gold, ops = self._train_runs()
            self._cache["train"] = {"fp32": fp32, "policy": pol, "golden": gold,
                                    "precise": self._precise(gold, fp32)}
            if key is not None and self.disk is not None:
                parts = {"fp32": fp32, "policy": pol if pol is not fp32 else None, "golden": gold}
                self.disk.put(key, {f"{k}.{name}": t for k, d in parts.items() if d for name, t in d.items()},
                              {"ops": ops})
        return self._cache["train"]

    def _train_runs(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor],
                                   dict[str, torch.Tensor] | None, list[str]]:
        try:
            fp32, ops = self._traced_part(lambda: train_step(copy.deepcopy(self.model), self.inputs))
            if self.policy in judge.REDUCED_POLICIES:
                with policy_mode(self.policy):
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
        return fp32, pol, gold, ops


def merge_ops(recorder: OpRecorder, ops: list[str]) -> None:
    """Add ``ops`` to a recorder's trace in order of first use, as if they had been recorded on it."""
    for op in ops:
        recorder._ops.setdefault(op, None)


def _unflatten(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor] | None:
    got = {name.split(".", 1)[1]: t for name, t in tensors.items() if name.startswith(prefix + ".")}
    return got or None


# The code that computes a reference is part of its key: an edit to it (or to the input table) is a new entry. Read
# at import, so the digest is of the code this process runs.
CODE_DIGEST = hashlib.sha256(b"".join(Path(f).read_bytes() for f in (
    __file__, input_table.__file__, precision_mode.__file__))).hexdigest()


def _key_parts(path: Path, policy: str, seed: int, inputs: dict[str, torch.Tensor]) -> dict[str, Any] | None:
    """Everything that determines this checkpoint's reference, for the cache key (None: not cacheable)."""
    try:
        path = Path(path)
        configs = {p.name: json.loads(p.read_text()) for p in sorted(path.glob("*.json"))}
        weights = {p.name: file_digest(p) for p in sorted(path.glob("*.safetensors"))}
    except (OSError, ValueError):
        return None
    return {"configs": configs, "weights": weights, "seed": seed, "policy": policy, "inputs": tensors_spec(inputs),
            "code": CODE_DIGEST, "threads": torch.get_num_threads()}


def prepare_reference(path: Path, policy: str, seed: int, cache: ReferenceCache | None = None) -> Reference:
    """Load on CPU, run forward twice (traced), run fp64 and policy precision; raise ReferenceFailure if it fails.

    With ``cache``, the forward results come from it when an entry for this checkpoint, inputs, policy and library
    versions exists; a reference whose two runs agreed is stored there (the later generate and train parts too)."""
    seed_everything(seed)
    try:
        model = load_model(path, "cpu")
    except Exception as exc:
        raise ReferenceFailure(f"reference load failed: {type(exc).__name__}: {exc}") from exc
    vocab = int(getattr(model.config.get_text_config(), "vocab_size", 0) or MAX_INPUT_ID)
    inputs = make_inputs(vocab, seed, model.config)
    parts = _key_parts(path, policy, seed, inputs) if cache is not None else None
    ref = Reference(path=path, policy=policy, seed=seed, model=model, inputs=inputs, logits=torch.empty(0),
                    policy_logits=torch.empty(0), golden_logits=None, determinism=judge.Verdict(Status.PASS, {}),
                    disk=cache if parts is not None else None, key_parts=parts)
    key, hit = ref._lookup("forward", {"batch": BATCH, "seq": SEQ}, ("logits",), ("ops", "determinism"))
    if hit is not None:
        tensors, meta = hit
        merge_ops(ref.recorder, meta["ops"])
        ref.logits, ref.golden_logits = tensors["logits"], tensors.get("golden")
        ref.policy_logits = tensors.get("policy_logits", ref.logits)
        if ref.golden_logits is not None:
            ref._golden_model = copy.deepcopy(model).to(torch.float64)
        ref.determinism = judge.Verdict(Status.PASS, dict(meta["determinism"]))
        return ref
    with torch.random.fork_rng(devices=[]):  # hit or miss, the device checks see the same RNG state
        _forward_runs(ref)
    if key is not None and cache is not None and ref.determinism.passed:  # a reference_fail is never cached
        tensors = {"logits": ref.logits}
        if ref.policy_logits is not ref.logits:
            tensors["policy_logits"] = ref.policy_logits
        if ref.golden_logits is not None:
            tensors["golden"] = ref.golden_logits
        cache.put(key, tensors, {"ops": ref.ops, "determinism": ref.determinism.metrics})
    return ref


def _forward_runs(ref: Reference) -> None:
    """The fp32 forward twice (the first traced), the fp64 golden run and the policy-precision run, into ``ref``."""
    model, inputs, policy, recorder = ref.model, ref.inputs, ref.policy, ref.recorder
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
            with policy_mode(policy):
                policy_logits = forward_logits(model, inputs).float()
        except Exception as exc:
            raise ReferenceFailure(f"reference {policy} forward failed: {type(exc).__name__}: {exc}") from exc
    ref.logits, ref.policy_logits, ref.golden_logits, ref._golden_model = run1, policy_logits, golden, golden_model
    ref.determinism = judge.reference_determinism(run1, run2, golden)
