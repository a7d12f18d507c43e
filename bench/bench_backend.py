"""Benchmark of the simulated neuron device: tiny Llama forward and 32-token greedy generate, neuron vs CPU eager.

Run: .venv/bin/python bench/bench_backend.py [--repeats N] [--clock cpu]; prints ratios (median of
alternating CPU/device pairs), the Python overhead per dispatched op, and the floor: the same runs through a
do-nothing Python wrapper subclass (unwrap, run the op, wrap), the least any Python tensor-subclass device costs. ``--clock cpu`` times with the thread's CPU
time instead of the wall clock: on a shared box whose load exceeds its cores, wall-clock ratios swing 2-3x between
runs, while CPU time counts only this thread's work (torch runs one intra-op thread here).
"""

from __future__ import annotations

import argparse
import time

import torch
from tiny_llama import CLOCK, model, paired, runs
from transformers import LlamaForCausalLM

import neuron_backend
from neuron_backend import dispatch


class Floor(torch.Tensor):
    """A wrapper subclass that does nothing but unwrap, run the op on the host and wrap: the per-op floor of a
    device written as a Python tensor subclass (no decisions, no memory accounting, no numerics)."""

    @staticmethod
    def __new__(cls, data: torch.Tensor) -> Floor:
        t = torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=data.dtype, device=data.device,
                                                strides=data.stride(), storage_offset=data.storage_offset())
        t._data = data
        return t

    ops = 0  # ops dispatched, for the printout

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        cls.ops += 1

        def un(a):
            if type(a) is Floor:
                return a._data
            if type(a) is list or type(a) is tuple:
                return [x._data if type(x) is Floor else x for x in a]
            return a

        out = func(*[un(a) for a in args], **({k: un(v) for k, v in kwargs.items()} if kwargs else {}))
        if type(out) is torch.Tensor:
            return Floor(out)
        if type(out) is tuple or type(out) is list:
            return type(out)(Floor(o) if type(o) is torch.Tensor else o for o in out)
        return out


def _floor_model() -> LlamaForCausalLM:
    m = model()
    with torch.no_grad():
        for mod in m.modules():
            for name, p in list(mod._parameters.items()):
                if p is not None:
                    mod._parameters[name] = torch.nn.Parameter(Floor(p.detach()), requires_grad=False)
            for name, b in list(mod._buffers.items()):
                if b is not None:
                    mod._buffers[name] = Floor(b)
    return m


def _count_ops(fn) -> int:
    n = [0]
    orig = dispatch.dispatch

    def counting(func, args, kwargs):
        n[0] += 1
        return orig(func, args, kwargs)

    from neuron_backend import tensor

    # Both entries into the device: the tensor's __torch_dispatch__ and the fused kernels (fused.py).
    tensor.set_dispatch(counting)
    dispatch.dispatch = counting
    try:
        fn()
    finally:
        tensor.set_dispatch(orig)
        dispatch.dispatch = orig
    return n[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    if args.clock == "cpu":
        CLOCK[0] = time.thread_time
    torch.set_num_threads(1)  # the ratio should measure per-op overhead, not thread scheduling on a shared box
    dev = model().to("neuron")
    ids = torch.randint(0, 256, (1, 16))
    ids_n = ids.to("neuron")
    fwd_cpu, gen_cpu = runs(model(), ids, args.new_tokens)
    fwd_dev, gen_dev = runs(dev, ids_n, args.new_tokens)

    compiled = torch.compile(dev, backend="neuron")

    def fwd_compiled():
        with torch.no_grad():
            compiled(ids_n)

    info = neuron_backend.device_info()
    print(f"device: {info['name']} simulated={neuron_backend.SIMULATED} profile={info['profile']} "
          f"policy={neuron_backend.numerics_policy()} torch={torch.__version__} clock={args.clock}")
    for label, f_cpu, f_dev in (("forward", fwd_cpu, fwd_dev), (f"generate{args.new_tokens}", gen_cpu, gen_dev)):
        t_cpu, t_dev, ratio = paired(f_cpu, f_dev, args.repeats)
        ops = _count_ops(f_dev)
        per_op = (t_dev - t_cpu) / ops * 1e6
        print(f"{label:>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_dev * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
              f"dispatched ops {ops:5d}  overhead {per_op:5.1f} us/op")
    # The floor: what the same runs cost through a subclass that does nothing per op (its own op count: the host's
    # fused SDPA is one op there, the device lowers it).
    flo = _floor_model()
    fwd_floor, gen_floor = runs(flo, Floor(ids), args.new_tokens)

    for label, f_cpu, f_flo in (("forward", fwd_cpu, fwd_floor), (f"generate{args.new_tokens}", gen_cpu, gen_floor)):
        t_cpu, t_flo, ratio = paired(f_cpu, f_flo, args.repeats)
        Floor.ops = 0
        f_flo()
        print(f"{'floor ' + label:>18}: cpu {t_cpu * 1e3:8.2f} ms  subclass {t_flo * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
              f"dispatched ops {Floor.ops:5d}  (a do-nothing Python wrapper subclass)")
    # Graph capture: the compiled graph runs the lowered ops on the host data with no per-op device dispatch.
    t_cpu, t_comp, ratio = paired(fwd_cpu, fwd_compiled, args.repeats)
    print(f"{'fwd compiled':>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_comp * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
          f"(torch.compile(backend='neuron') vs CPU eager; {neuron_backend.compile_stats()})")


if __name__ == "__main__":
    main()
