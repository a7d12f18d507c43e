"""The CPU side of the lora and sft checks, cached like the other references (reference_cache.py, issue 20): keyed
by the checkpoint's key parts plus the check's own parameters, the code that computes it and its libraries' versions.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from worker.judge import judge
from worker.judge.attribution import raised_at
from worker.run.reference import finetune_params
from worker.run.reference import lora as lora_mod
from worker.run.reference import reference as reference_mod
from worker.run.reference import sft as sft_mod
from worker.run.reference.context import CheckContext
from worker.run.reference.precision_mode import policy_mode
from worker.run.reference.reference import ReferenceFailure
from worker.run.reference.reference_cache import tensors_spec, versions_of

# The code that computes these references is part of their key (as reference.CODE_DIGEST is of the others, and
# reference.py itself is in that one): an edit to the LoRA or SFT recipe or to their hyper-parameters is a new entry.
# Read at import, so the digest is of the code this process runs.
CODE_DIGEST = hashlib.sha256(b"".join(Path(m.__file__).read_bytes() for m in (lora_mod, sft_mod, finetune_params))
                             + Path(__file__).read_bytes()).hexdigest()
# Libraries the SFT run goes through beyond the key's own (torch, transformers, peft, trl): Trainer's device
# placement and data loading (accelerate), the in-memory dataset (datasets) and the code-built tokenizer (tokenizers).
SFT_LIBRARIES = ("accelerate", "datasets", "tokenizers")
_STEP = ("loss", "grads", "params")


def reference_failure(what: str, exc: BaseException, library: str) -> ReferenceFailure:
    """The CPU side failed: say what, the error, and where in ``library`` (the one the check drives) it was
    raised, so a user sees at once that TRL's or PEFT's own code fails on this architecture."""
    where = raised_at(exc, (f"{library}/",))
    # Where first: the record's reason keeps the first 500 characters, and messages can be long.
    return ReferenceFailure(f"{what}" + (f" at {where}" if where else "") + f": {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def rng_kept() -> Iterator[None]:
    """Every RNG the references draw from (peft's adapter init; Trainer's ``set_seed`` reseeds Python's, NumPy's
    and torch's) as it was before: hit or miss, the device checks after this see the same RNG state."""
    py, npy = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)


def _plain(value: Any) -> Any:
    """A JSON form with a fixed order: sets (peft's target_modules) sorted, containers walked."""
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _flat(parts: dict[str, dict[str, torch.Tensor] | None]) -> dict[str, torch.Tensor]:
    return {f"{k}.{name}": t for k, d in parts.items() if d for name, t in d.items()}


def _part(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor] | None:
    got = {name.split(".", 1)[1]: t for name, t in tensors.items() if name.startswith(prefix + ".")}
    return got or None


# --- lora -------------------------------------------------------------------------------------------------------


def lora_params(ref: reference_mod.Reference, targets: lora_mod.Targets) -> dict[str, Any]:
    """What determines the lora reference besides the checkpoint's key parts: the whole LoraConfig (rank, alpha,
    dropout, init, targets), the targets and how they were found, the AdamW step, whether an fp64 run is made."""
    return {"lora": _plain(lora_mod.lora_config(targets).to_dict()), "targets": list(targets.names),
            "rule": targets.rule, "lr": reference_mod.LR, "golden": ref._golden_model is not None,
            "code": CODE_DIGEST}


def lora_reference(ctx: CheckContext) -> dict[str, Any]:
    """The CPU side of the lora check (kept per architecture, and on disk): targets, the adapters' initial
    weights, and the step at fp32, at the device's policy precision and in fp64 (when the architecture runs in fp64)."""
    ref = ctx.ref
    if "lora" in ref._cache:
        return ref._cache["lora"]
    try:
        targets = lora_mod.discover_targets(ref.model)  # reads module names only: the same on any copy
    except Exception as exc:
        raise reference_failure("reference lora step failed", exc, "peft") from exc
    key, hit = ref.lookup_part("lora", lora_params(ref, targets), tuple(f"fp32.{p}" for p in _STEP))
    if hit is not None and (init := _part(hit[0], "init")) is not None:
        fp32 = _part(hit[0], "fp32") or {}  # never empty: the lookup requires its three tensors
        pol, gold = _part(hit[0], "policy") or fp32, _part(hit[0], "golden")
    else:
        if hit is not None:  # an entry without the adapters' initial weights cannot serve: recompute
            ref.cache_status["lora"] = "miss"
        with rng_kept():
            init, fp32, pol, gold = _lora_runs(ref, targets)
        ref.store_part(key, _flat({"init": init, "fp32": fp32, "policy": pol if pol is not fp32 else None,
                                   "golden": gold}), {"targets": targets.names, "rule": targets.rule})
    ref._cache["lora"] = {"targets": targets, "init": init, "policy": pol, "precise": ref._precise(gold, fp32)}
    return ref._cache["lora"]


def _lora_runs(ref: reference_mod.Reference, targets: lora_mod.Targets) -> tuple[
        dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor] | None]:
    """The adapters' initial weights and the CPU step: fp32, policy precision (the fp32 dict itself at fp32), fp64."""
    try:
        peft_model = lora_mod.add_adapters(copy.deepcopy(ref.model), targets, ref.seed)
        init = lora_mod.adapter_state(peft_model)
        fp32 = lora_mod.lora_step(copy.deepcopy(peft_model), ref.inputs)
        if ref.policy in judge.REDUCED_POLICIES:
            with policy_mode(ref.policy):
                pol = lora_mod.lora_step(copy.deepcopy(peft_model), ref.inputs)
        else:
            pol = fp32
    except Exception as exc:
        raise reference_failure("reference lora step failed", exc, "peft") from exc
    gold = None
    if ref._golden_model is not None:  # the architecture ran in fp64 for the forward reference
        golden = lora_mod.golden_copy(peft_model)
        try:
            gold = lora_mod.lora_step(golden, ref.inputs) if golden is not None else None
        except Exception:  # noqa: BLE001 - fp64 is a nicety; the judge falls back to the fp32 reference
            gold = None
    return init, fp32, pol, gold


# --- sft --------------------------------------------------------------------------------------------------------


def sft_params(ref: reference_mod.Reference, pad: int | None) -> dict[str, Any]:
    """What determines the sft reference besides the checkpoint's key parts: steps, learning rate, batch, the
    padding TRL picks for the device, the dataset's token ids, and the other libraries the run goes through."""
    ids = ref.inputs["input_ids"]
    return {"steps": sft_mod.SFT_STEPS, "lr": sft_mod.LR, "batch": sft_mod.BATCH, "pad_to_multiple_of": pad,
            "dataset": tensors_spec({"input_ids": ids}), "vocab": int(ids.max()) + 1,
            "libraries": versions_of(*SFT_LIBRARIES), "code": CODE_DIGEST}


def sft_reference(ctx: CheckContext) -> dict[str, Any]:
    """The CPU loss curve (kept per architecture, and on disk): at fp32 and at the device's policy precision, on
    batches padded as TRL pads them for the device (``sft.device_padding``)."""
    ref = ctx.ref
    if "sft" in ref._cache:
        return ref._cache["sft"]
    pad = sft_mod.device_padding(ctx.device.torch_device)
    key, hit = ref.lookup_part("sft", sft_params(ref, pad), ("fp32",))
    if hit is not None:
        fp32 = hit[0]["fp32"]
        pol = hit[0].get("policy", fp32)
    else:
        with rng_kept():
            fp32, pol = _sft_runs(ref, pad)
        ref.store_part(key, {"fp32": fp32, **({"policy": pol} if pol is not fp32 else {})}, {})
    # No fp64 SFT run: the policy run is measured against the fp32 one where they differ (reference.py's rule).
    ref._cache["sft"] = {"policy": pol, "precise": ref._precise(None, fp32), "pad_to_multiple_of": pad}
    return ref._cache["sft"]


def _sft_runs(ref: reference_mod.Reference, pad: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        fp32 = sft_mod.sft_losses(ref.path, ref.inputs, "cpu", seed=ref.seed, reference=True, pad_to_multiple_of=pad)
        if ref.policy in judge.REDUCED_POLICIES:
            with policy_mode(ref.policy):
                pol = sft_mod.sft_losses(ref.path, ref.inputs, "cpu", seed=ref.seed, reference=True,
                                         pad_to_multiple_of=pad)
        else:
            pol = fp32
    except Exception as exc:
        raise reference_failure("reference sft run failed", exc, "trl") from exc
    return fp32, pol
