"""Prototype of the C++ PrivateUse1 path (issue 20 item 3): tiny-Llama forward and generate on a C++ device.

Run: .venv/bin/python bench/bench_cpp_device.py [--repeats N]. Builds bench/cpp_device/proto_device.cpp (a
torch_openreg-style device: C++ allocator, guard, factory/copy/view kernels, ATen's boxed CPU fallback for the rest)
with torch.utils.cpp_extension (first run: a C++ compile of a minute or more), registers it as ``proto`` in this
process (never beside ``neuron``: both would be PrivateUse1), and prints the same ratios as bench_backend.py.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import types
from pathlib import Path

import torch
from tiny_llama import CLOCK, model, paired, runs
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent


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
    CLOCK[0] = time.thread_time  # bench_backend.py's --clock cpu
    torch.set_num_threads(1)
    cpu = model()
    dev = model().to("proto")
    ids = torch.randint(0, 256, (1, 16))
    ids_d = ids.to("proto")
    with torch.no_grad():
        diff = (dev(ids_d).logits.cpu() - cpu(ids).logits).abs().max().item()
    print(f"forward max |proto - cpu| = {diff:.3g} (the same CPU kernels, but SDPA takes its math path off the CPU: ~1e-7 expected)")

    fwd_cpu, gen_cpu = runs(cpu, ids, 32)
    fwd_dev, gen_dev = runs(dev, ids_d, 32)

    for label, f_cpu, f_dev in (("forward", fwd_cpu, fwd_dev), ("generate32", gen_cpu, gen_dev)):
        t_cpu, t_dev, ratio = paired(f_cpu, f_dev, args.repeats)
        print(f"{label:>12}: cpu {t_cpu * 1e3:8.2f} ms  proto {t_dev * 1e3:8.2f} ms  ratio {ratio:5.2f}x  (cpu clock)")


if __name__ == "__main__":
    main()
