"""Standalone repro scripts of the fine-tuning checks: lora/sft appended to the single-process repro (repro.py), and
fsdp/tp as a ``torchrun --nproc-per-node 2`` script. Pure: config dict in, Python source out; no harness import.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from compat.results import DISTRIBUTED_CHECKS, FINETUNE_CHECKS, Check
from worker.run.reference import inputs as input_table
from worker.run.reference.finetune_params import LORA_ALPHA, LORA_RANK, LORA_TARGETS, SFT_STEPS
from worker.run.reference.reference import BATCH, LR, MAX_INPUT_ID, SEQ
from worker.run.repro.repro import repro_script


class ReproMixError(ValueError):
    """fsdp/tp (a torchrun script) were asked for together with single-process checks."""


_SINGLE = '''

# --- fine-tuning checks (peft / trl) ---------------------------------------------------------------------------
import copy
import os
import re

LORA_TARGETS = {lora_targets!r}  # worker/run/reference/finetune_params.py's table, for architectures without attention projections


def lora_targets(model):
    """Linear layers under an attention block (worker/run/reference/lora.py discover_targets)."""
    from transformers.pytorch_utils import Conv1D

    classes = {{n: type(m).__name__ for n, m in model.named_modules()}}
    found = [n for n, m in model.named_modules() if n and isinstance(m, (torch.nn.Linear, Conv1D))
             and n.rpartition(".")[2] not in {{"gate_proj", "up_proj", "down_proj", "gate_up_proj"}}
             and (re.search(r"attention|attn|selfattn", classes.get(n.rpartition(".")[0], ""), re.I)
                  or re.search(r"(^|\\.)(self_attn|attn|attention|self_attention|attn_layer)(\\.|$)",
                               n.rpartition(".")[0], re.I))]
    if found:
        return found
    if model.config.model_type in LORA_TARGETS:
        return LORA_TARGETS[model.config.model_type]
    head = model.get_output_embeddings()
    return [n for n, m in model.named_modules() if n and isinstance(m, (torch.nn.Linear, Conv1D)) and m is not head]


if "lora" in CHECKS:
    from peft import LoraConfig, get_peft_model

    targets = lora_targets(ref)
    results = {{}}
    init = None
    for m, d in ((ref, "cpu"), (dev, DEVICE)):
        torch.manual_seed(SEED)
        pm = get_peft_model(m, LoraConfig(r={rank}, lora_alpha={alpha}, lora_dropout=0.0, target_modules=targets,
                                          init_lora_weights=False))
        params = [(n, p) for n, p in pm.named_parameters() if p.requires_grad]
        if init is None:
            init = {{n: p.detach().clone() for n, p in params}}
        with torch.no_grad():
            for n, p in params:
                p.copy_(init[n].to(p.device))
        frozen = {{n: p.detach().cpu().clone() for n, p in pm.named_parameters() if not p.requires_grad}}
        pm.train({train_mode})
        loss = pm(input_ids=ids.to(d), attention_mask=mask.to(d), labels=labels.to(d), use_cache=False,
                  **{{k: v.to(d) for k, v in extra.items()}}).loss
        loss.backward()
        grads = torch.cat([p.grad.detach().reshape(-1).cpu() for _, p in params])
        torch.optim.AdamW([p for _, p in params], lr={lr}).step()
        after = torch.cat([p.detach().reshape(-1).cpu() for _, p in params])
        moved = [n for n, p in pm.named_parameters() if not p.requires_grad and not torch.equal(p.cpu(), frozen[n])]
        print(d, "lora loss", loss.item(), "frozen weights changed:", len(moved))
        results[d] = (loss.detach().cpu().reshape(1), grads, after)
    for name, a, b in zip(("loss", "adapter grads", "adapter weights"), results["cpu"], results[DEVICE]):
        cmp("lora " + name, b, a)

if "sft" in CHECKS:
    from accelerate.state import AcceleratorState
    from datasets import Dataset
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from trl import SFTConfig, SFTTrainer

    vocab = int(ids.max()) + 1
    words = {{"<pad>": 0, **{{f"t{{i}}": i for i in range(1, vocab)}}}}
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(words, unk_token="<pad>")),
                                               pad_token="<pad>", eos_token="<pad>", unk_token="<pad>")
    curves = {{}}
    for d in ("cpu", DEVICE):
        AcceleratorState._reset_state(reset_partial_state=True)  # Trainer and Accelerate pick the device themselves
        args = SFTConfig(output_dir=tempfile.mkdtemp(), use_cpu=d == "cpu" or DEVICE == "cpu", max_steps={steps},
                         per_device_train_batch_size={batch}, learning_rate={lr}, lr_scheduler_type="constant",
                         warmup_steps=0, logging_steps=1, save_strategy="no", report_to="none", bf16=False,
                         fp16=False, gradient_checkpointing=False, seed=SEED, data_seed=SEED,
                         dataloader_num_workers=0, disable_tqdm=True, max_length=None, packing=False)
        trainer = SFTTrainer(model=load("cpu").train(), args=args, processing_class=tok,
                             train_dataset=Dataset.from_dict({{"input_ids": ids.tolist()}}))
        trainer.train()
        curves[d] = torch.tensor([e["loss"] for e in trainer.state.log_history if "loss" in e])
        print(d, "sft losses", curves[d].tolist(), "trained on", next(trainer.model.parameters()).device)
    cmp("sft loss curve", curves[DEVICE], curves["cpu"])
'''

_TORCHRUN = '''#!/usr/bin/env python3
"""Reproduce: {arch} on device {device!r}, check(s) {checks} over 2 ranks (generated by `compat repro`).

Run:  torchrun --nproc-per-node 2 THIS_SCRIPT.py
Same tiny config, seed and inputs as the sweep; needs torch and transformers{extra_req}. Rank 0 also runs the
single-process CPU reference and prints what it compares; an exception on a rank is the failure itself.
"""
import datetime
import json
import os
import tempfile

import torch
import torch.distributed as dist
import transformers

ARCH = {arch!r}
DEVICE = {device!r}
SEED = {seed}
CHECKS = {checks!r}
CONFIG = json.loads(r"""{config}""")
RANK, LOCAL_RANK, WORLD = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
KIND = DEVICE.split(":")[0]

if KIND == "neuron":
    try:
        import torch_neuronx  # noqa: F401  (a real install takes precedence)
    except ImportError:
        import neuron_backend  # noqa: F401  (the bundled simulated device and its "neuron" process group)

cls = getattr(transformers, ARCH)
config = cls.config_class.from_dict(CONFIG)
torch.manual_seed(SEED)
path = tempfile.mkdtemp(prefix=f"repro-rank{{RANK}}-")  # every rank builds the same seeded checkpoint
cls._from_config(config, dtype=torch.float32).save_pretrained(path)
dev = torch.device(KIND, LOCAL_RANK) if KIND != "cpu" else torch.device("cpu")
dist.init_process_group(backend="neuron" if KIND == "neuron" else "gloo", timeout=datetime.timedelta(seconds=60))

gen = torch.Generator().manual_seed(SEED)
high = max(2, min(int(getattr(config.get_text_config(), "vocab_size", 0) or {max_id}), {max_id}))
ROWS = {rows}  # input_ids rows per sample (MusicGen: one per codebook)
ids = torch.randint(1, high, ({batch} * ROWS, {seq}), generator=gen)
mask = torch.ones_like(ids)
prompt = torch.randint(1, high, (ROWS, 8), generator=gen)  # drawn as the sweep does, so the images come next
labels = ids.reshape(-1, ROWS, ids.shape[-1]).transpose(1, 2).contiguous() if {codebook_labels} else ids
extra = {{}}
if {pixel_values}:
    vision = config.vision_config
    extra["pixel_values"] = torch.randn({batch}, vision.num_channels, vision.image_size, vision.image_size,
                                        generator=gen)


def load(device_map="cpu"):
    return cls.from_pretrained(path, dtype=torch.float32, device_map=device_map, use_safetensors=True).eval()


def cmp(name, got, want):
    got, want = got.detach().double().cpu().flatten(), want.detach().double().cpu().flatten()
    cos = torch.nn.functional.cosine_similarity(got, want, dim=0, eps=1e-6).item()
    print(f"rank {{RANK}} {{name}}: max abs err {{(got - want).abs().max().item():.3g}}, cosine {{cos:.6f}}")


def full(t):
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().cpu()


def step(model, x, m, y, px):
    model.train({train_mode})
    loss = model(input_ids=x, attention_mask=m, labels=y, use_cache=False, **px).loss
    loss.backward()
    params = [p for p in model.parameters() if p.requires_grad]
    torch.optim.AdamW(params, lr={lr}).step()
    return loss, torch.cat([full(p).reshape(-1) for p in params])


if "fsdp" in CHECKS:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = load(str(dev))
    mesh = init_device_mesh(dev.type, (WORLD,))
    blocks = set(getattr(model, "_no_split_modules", None) or [])
    counts = {{}}
    for _, p in model.named_parameters(remove_duplicate=False):
        counts[id(p)] = counts.get(id(p), 0) + 1
    chosen = []  # outermost blocks without a tied parameter (the harness's rule, worker/run/ranks/ranks.py)
    for name, module in model.named_modules():
        if (name and type(module).__name__ in blocks and not any(name.startswith(c + ".") for c in chosen)
                and not any(counts[id(p)] > 1 for p in module.parameters())):
            chosen.append(name)
    for name in chosen:
        fully_shard(model.get_submodule(name), mesh=mesh)
    fully_shard(model, mesh=mesh)
    rows = slice(RANK * ROWS, (RANK + 1) * ROWS)  # this rank's sample of the global batch
    px = {{k: v[RANK:RANK + 1].to(dev) for k, v in extra.items()}}
    y = labels[RANK:RANK + 1] if {codebook_labels} else labels[rows]
    loss, params = step(model, ids[rows].to(dev), mask[rows].to(dev), y.to(dev), px)
    mean_loss = loss.detach().clone()
    dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
    if RANK == 0:
        ref_loss, ref_params = step(load(), ids, mask, labels, extra)
        cmp("fsdp loss", mean_loss, ref_loss)
        cmp("fsdp params after the step", params, ref_params)

if "tp" in CHECKS:
    from transformers.distributed import DistributedConfig

    model = cls.from_pretrained(path, dtype=torch.float32, use_safetensors=True,
                                distributed_config=DistributedConfig(tp_plan="auto")).eval()
    with torch.no_grad():
        logits = full(model(input_ids=ids.to(dev), attention_mask=mask.to(dev), use_cache=False).logits)
        want = load()(input_ids=ids, attention_mask=mask, use_cache=False).logits
    cmp("tp logits", logits, want)

dist.destroy_process_group()
'''


def _spec(config: dict[str, Any]) -> tuple[SimpleNamespace, Any]:
    cfg = SimpleNamespace(**config)
    return cfg, input_table.spec_for(cfg)


def finetune_repro(architecture: str, device: str, config: dict[str, Any], *, seed: int = 0,
                   checks: list[Check] | None = None, compile_backend: str = "inductor") -> str:
    """The repro for ``checks``: fsdp/tp -> a torchrun script; lora/sft (with any single-process checks) -> the
    single-process repro with the fine-tuning blocks; otherwise repro.py's script unchanged."""
    wanted = [Check(c) for c in (checks or [])]
    distributed = [c for c in wanted if c in DISTRIBUTED_CHECKS]
    if distributed and len(distributed) != len(wanted):
        raise ReproMixError("fsdp/tp reproduce with torchrun over 2 ranks: ask for them apart from other checks")
    cfg, spec = _spec(config)
    if distributed:
        body = json.dumps(config, indent=1, sort_keys=True, default=str)
        return _TORCHRUN.format(
            arch=architecture, device=device, seed=int(seed), checks=[str(c) for c in distributed], config=body,
            max_id=MAX_INPUT_ID, batch=BATCH, seq=SEQ, lr=LR, rows=input_table.rows_per_sample(spec, cfg),
            codebook_labels=spec.labels == "codebooks", pixel_values=spec.train_pixel_values,
            train_mode=spec.train_mode,
            extra_req=" (and the neuron backend for device neuron)" if device.startswith("neuron") else "")
    script = repro_script(architecture, device, config, seed=seed, checks=wanted or None,
                          compile_backend=compile_backend)
    if not any(c in FINETUNE_CHECKS for c in wanted):
        return script
    return script + _SINGLE.format(lora_targets=LORA_TARGETS, rank=LORA_RANK, alpha=LORA_ALPHA, lr=LR,
                                   steps=SFT_STEPS, batch=BATCH, train_mode=spec.train_mode)
