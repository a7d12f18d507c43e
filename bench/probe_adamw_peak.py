"""The device's peak memory over one AdamW step of a tiny architecture, on the optimizer's default, foreach or loop path.

Why `train`'s peak_mem_mb moved with the C++ core (bench/README.md, issue 35): run under each implementation
(PYTHONPATH) with each path; e.g. `python bench/probe_adamw_peak.py LlamaForCausalLM llama default`.
"""

from __future__ import annotations

import argparse

import torch
from torch.optim.optimizer import _default_to_fused_or_foreach

import neuron_backend  # noqa: F401 - registers the device
from compat.results import ArchitectureEntry
from worker.build.build import build_model
from worker.run.reference.reference import LR, make_inputs

MB = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("architecture")
    parser.add_argument("model_type")
    parser.add_argument("path", choices=["default", "foreach", "loop"])
    args = parser.parse_args()
    model, cfg, _ = build_model(ArchitectureEntry(name=args.architecture, model_type=args.model_type, rank=1))
    model = model.to("neuron")
    inputs = make_inputs(cfg.vocab_size, 0, cfg)
    ids = inputs["input_ids"].to("neuron")
    model(input_ids=ids, attention_mask=inputs["attention_mask"].to("neuron"), labels=ids, use_cache=False).loss.backward()
    params = [p for p in model.parameters() if p.requires_grad]
    print(f"parameter type {type(params[0]).__name__}; torch's default (fused, foreach): "
          f"{_default_to_fused_or_foreach(params, False)}")
    kw = {} if args.path == "default" else {"foreach": args.path == "foreach"}
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.memory_allocated()
    torch.optim.AdamW(params, lr=LR, **kw).step()
    print(f"{args.path}: step peak {torch.neuron.max_memory_allocated() / MB:.3f} MB, allocated before "
          f"{before / MB:.3f} MB, after {torch.neuron.memory_allocated() / MB:.3f} MB")


if __name__ == "__main__":
    main()
