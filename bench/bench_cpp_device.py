"""Prototype of the C++ PrivateUse1 path (issue 20 item 3): tiny-Llama forward and generate on a C++ device.

Run: .venv/bin/python bench/bench_cpp_device.py [--repeats N]. Builds bench/cpp_device/proto_device.cpp (a
torch_openreg-style device: C++ allocator, guard, factory/copy/view kernels, ATen's boxed CPU fallback for the rest)
with torch.utils.cpp_extension (first run: a C++ compile of a minute or more), registers it as ``proto`` in this
process (never beside ``neuron``: both would be PrivateUse1), and prints the same ratios as bench_backend.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import types
from pathlib import Path

import torch
from torch.utils.cpp_extension import load
from transformers import LlamaConfig, LlamaForCausalLM

HERE = Path(__file__).resolve().parent


def _model() -> LlamaForCausalLM:
    """bench_backend.py's model (not imported from there: that module imports neuron_backend, also PrivateUse1)."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg).eval()


def _paired(f_cpu, f_dev, repeats: int) -> tuple[float, float, float]:
    """bench_backend.py's pairing: alternating CPU/device runs, thread CPU time, medians and the median ratio."""
    f_cpu(), f_dev()
    cpu, dev = [], []
    for _ in range(repeats):
        t0 = time.thread_time()
        f_cpu()
        cpu.append(time.thread_time() - t0)
        t0 = time.thread_time()
        f_dev()
        dev.append(time.thread_time() - t0)
    return statistics.median(cpu), statistics.median(dev), statistics.median(d / c for c, d in zip(cpu, dev, strict=True))


def _device_module() -> types.ModuleType:
    """The ``torch.proto`` module PyTorch asks a PrivateUse1 backend for (device count, current device, RNG)."""
    mod = types.ModuleType("torch.proto")
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: 0
    mod._is_in_bad_fork = lambda: False
    mod.manual_seed_all = lambda seed: None
    mod.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16]
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    build = Path(os.environ.get("PROTO_BUILD_DIR", Path(tempfile.gettempdir()) / "compat-proto-device"))
    build.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    load(name="proto_device", sources=[str(HERE / "cpp_device" / "proto_device.cpp")], build_directory=str(build),
         extra_cflags=["-O2"], verbose=False)
    print(f"extension built/loaded in {time.perf_counter() - t0:.1f} s")
    torch.utils.rename_privateuse1_backend("proto")
    torch._register_device_module("proto", _device_module())
    torch.utils.generate_methods_for_privateuse1_backend()
    torch.set_num_threads(1)
    cpu = _model()
    dev = _model().to("proto")
    ids = torch.randint(0, 256, (1, 16))
    ids_d = ids.to("proto")
    kw = dict(max_new_tokens=32, min_new_tokens=32, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        diff = (dev(ids_d).logits.cpu() - cpu(ids).logits).abs().max().item()
    print(f"forward max |proto - cpu| = {diff:.3g} (the same CPU kernels, but SDPA takes its math path off the CPU: ~1e-7 expected)")

    def fwd_cpu():
        with torch.no_grad():
            cpu(ids)

    def fwd_dev():
        with torch.no_grad():
            dev(ids_d)

    def gen_cpu():
        cpu.generate(ids, attention_mask=torch.ones_like(ids), **kw)

    def gen_dev():
        dev.generate(ids_d, attention_mask=torch.ones_like(ids_d), **kw)

    for label, f_cpu, f_dev in (("forward", fwd_cpu, fwd_dev), ("generate32", gen_cpu, gen_dev)):
        t_cpu, t_dev, ratio = _paired(f_cpu, f_dev, args.repeats)
        print(f"{label:>12}: cpu {t_cpu * 1e3:8.2f} ms  proto {t_dev * 1e3:8.2f} ms  ratio {ratio:5.2f}x  (cpu clock)")


if __name__ == "__main__":
    main()
