"""Benchmark of the simulated neuron device: tiny Llama forward and 32-token greedy generate, neuron vs CPU eager.

Run: .venv/bin/python bench/bench_backend.py [--repeats N] [--clock cpu] [--breakdown] [--in-process]; prints
ratios (median of alternating CPU/device pairs), how many ops reached the device's C++ kernel and how many of them took
the Python slow path, and (--breakdown) the same with the C++ fast path off (every op through dispatch.py).
``--in-process`` measures the forward again after a torch.compile and a training step in the same process (the
issue-35 acceptance figure). ``--clock cpu`` times with the thread's CPU time instead of the wall clock: on a shared
box whose load exceeds its cores, wall-clock ratios swing 2-3x between runs, while CPU time counts only this thread's
work (torch runs one intra-op thread here).
"""

from __future__ import annotations

import argparse
import time

import torch
from tiny_llama import CLOCK, model, paired, runs

import neuron_backend
from neuron_backend.tensor import _C


def _count_ops(fn) -> tuple[int, int]:
    """(ops that reached the device's C++ kernel, of which on the Python slow path) while ``fn`` runs."""
    fast0, slow0 = _C.counts()
    fn()
    fast1, slow1 = _C.counts()
    return (fast1 - fast0) + (slow1 - slow0), slow1 - slow0


def _train_step(dev_model, ids_n) -> None:
    """One optimizer step on the device (what the in-process figure runs before it measures again)."""
    opt = torch.optim.SGD(dev_model.parameters(), lr=1e-3)
    dev_model.train()
    out = dev_model(ids_n, labels=ids_n)
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    dev_model.eval()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--breakdown", action="store_true", help="also time the device with its C++ fast path off")
    ap.add_argument("--in-process", action="store_true", help="also time the forward (batch 2 x 16) after a "
                    "compile and a training step in the same process")
    args = ap.parse_args()
    if args.clock == "cpu":
        CLOCK[0] = time.thread_time
    torch.set_num_threads(1)  # the ratio should measure per-op overhead, not thread scheduling on a shared box
    dev = model().to("neuron")
    ids = torch.randint(0, 256, (1, 16))
    ids_n = ids.to("neuron")
    cpu_model = model()
    fwd_cpu, gen_cpu = runs(cpu_model, ids, args.new_tokens)
    fwd_dev, gen_dev = runs(dev, ids_n, args.new_tokens)

    compiled = torch.compile(dev, backend="neuron")

    def fwd_compiled():
        with torch.no_grad():
            compiled(ids_n)

    info = neuron_backend.device_info()
    print(f"device: {info['name']} simulated={neuron_backend.SIMULATED} profile={info['profile']} "
          f"policy={neuron_backend.numerics_policy()} torch={torch.__version__} clock={args.clock}")
    pairs = (("forward", fwd_cpu, fwd_dev), (f"generate{args.new_tokens}", gen_cpu, gen_dev))
    for label, f_cpu, f_dev in pairs:
        t_cpu, t_dev, ratio = paired(f_cpu, f_dev, args.repeats)
        ops, slow = _count_ops(f_dev)
        print(f"{label:>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_dev * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
              f"device ops {ops:5d} (Python slow path {slow})")
    if args.breakdown:
        _C.set_fast(False)
        try:
            for label, f_cpu, f_dev in pairs:
                t_cpu, t_dev, ratio = paired(f_cpu, f_dev, args.repeats)
                print(f"{label:>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_dev * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
                      "(C++ fast path off: every op through dispatch.py)")
        finally:
            _C.set_fast(True)
    t_cpu, t_comp, ratio = paired(fwd_cpu, fwd_compiled, args.repeats)
    print(f"{'fwd compiled':>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_comp * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
          f"(torch.compile(backend='neuron') vs CPU eager; {neuron_backend.compile_stats()})")
    if args.in_process:
        ids2 = torch.randint(0, 256, (2, 16))
        ids2_n = ids2.to("neuron")
        _train_step(dev, ids2_n)
        f_cpu, _ = runs(cpu_model, ids2, args.new_tokens)
        f_dev, _ = runs(dev, ids2_n, args.new_tokens)
        t_cpu, t_dev, ratio = paired(f_cpu, f_dev, args.repeats)
        print(f"{'fwd 2x16 after compile+train':>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_dev * 1e3:8.2f} ms  "
              f"ratio {ratio:5.2f}x")


if __name__ == "__main__":
    main()
