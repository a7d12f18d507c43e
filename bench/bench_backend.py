"""Benchmark of the simulated neuron device: tiny Llama forward and 32-token greedy generate, neuron vs CPU eager.

Run: .venv/bin/python bench/bench_backend.py [--repeats N] [--clock cpu] [--breakdown]; prints ratios (median of
alternating CPU/device pairs), the Python overhead per dispatched op, and the floor: the same model and device
tensors with the device's dispatcher replaced by a do-nothing unwrap/run/wrap (same wrapper type, same ops reaching
it), what this device would cost if its own modelled work were free. ``--clock cpu`` times with the thread's CPU
time instead of the wall clock: on a shared box whose load exceeds its cores, wall-clock ratios swing 2-3x between
runs, while CPU time counts only this thread's work (torch runs one intra-op thread here).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

import torch
from tiny_llama import CLOCK, model, paired, runs
from transformers import LlamaForCausalLM

import neuron_backend
from neuron_backend import attention, dispatch, numerics, tensor
from neuron_backend.tensor import NeuronTensor


@contextlib.contextmanager
def _dispatching(fn) -> Iterator[None]:
    """Every device op through ``fn(func, args, kwargs)``: both entries into the device, the tensor's
    __torch_dispatch__ and the fused kernels (fused.py looks ``dispatch.dispatch`` up per call)."""
    orig = dispatch.dispatch
    tensor.set_dispatch(fn)
    dispatch.dispatch = fn
    try:
        yield
    finally:
        tensor.set_dispatch(orig)
        dispatch.dispatch = orig


@contextlib.contextmanager
def without(memory: bool, rounding: bool) -> Iterator[None]:
    """The device with its memory accounting and/or its bf16 operand rounding switched off, to size what each costs
    (--breakdown and the floor; verdicts are not the point here, only time)."""
    saved = (tensor._track, attention._track, numerics._round_bf16)
    if memory:
        tensor._track = attention._track = lambda *a: None
    if rounding:
        numerics._round_bf16 = lambda t: t
    try:
        yield
    finally:
        tensor._track, attention._track, numerics._round_bf16 = saved


def _floor_dispatch(func, args, kwargs):
    """The device's dispatcher with the device taken out: unwrap, run the op on the host data, wrap (tensor.wrap,
    its memory accounting off under floor()). No decisions, numerics or records; the same wrapper type, the same
    ops reaching it, the same fused kernels (linear and SDPA one op each, as on the device)."""

    def un(a):
        t = type(a)
        if t is NeuronTensor:
            return a._data
        if t is list or t is tuple:
            return [x._data if type(x) is NeuronTensor else x for x in a]
        return a

    out = func(*[un(a) for a in args], **({k: un(v) for k, v in kwargs.items()} if kwargs else {}))
    if type(out) is torch.Tensor:
        return tensor.wrap(out, 0)
    if type(out) is tuple or type(out) is list:
        return type(out)(tensor.wrap(o, 0) if type(o) is torch.Tensor else o for o in out)
    return out


@contextlib.contextmanager
def floor() -> Iterator[None]:
    """The device's per-op floor: the tiny model keeps its device tensors, every op takes the do-nothing path."""
    sdpa = attention.sdpa
    attention.sdpa = lambda args, kwargs, by_device: by_device(args, kwargs)  # the host's own SDPA, one op
    try:
        with without(memory=True, rounding=True), _dispatching(_floor_dispatch):
            yield
    finally:
        attention.sdpa = sdpa


def fwd_logits(m: LlamaForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    out = m(ids).logits
    return out._data if type(out) is NeuronTensor else out


def _count_ops(fn) -> int:
    """Device ops ``fn`` dispatches, through whichever dispatcher is installed (the device's, or the floor's)."""
    n = [0]
    inner = dispatch.dispatch

    def counting(func, args, kwargs):
        n[0] += 1
        return inner(func, args, kwargs)

    with _dispatching(counting):
        fn()
    return n[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--breakdown", action="store_true", help="also time the device with its memory accounting, "
                    "its bf16 operand rounding, then both, switched off")
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
        ops = _count_ops(f_dev)
        per_op = (t_dev - t_cpu) / ops * 1e6
        print(f"{label:>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_dev * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
              f"dispatched ops {ops:5d}  overhead {per_op:5.1f} us/op")
    parts = {"memory accounting": (True, False), "bf16 operand rounding": (False, True),
             "memory accounting and bf16 operand rounding": (True, True)}
    for part, (memory, rounding) in parts.items() if args.breakdown else ():
        with without(memory, rounding):
            for label, f_cpu, f_dev in pairs:
                t_cpu, t_dev, ratio = paired(f_cpu, f_dev, args.repeats)
                print(f"{label:>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_dev * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
                      f"without {part}")
    # The floor: the same model, inputs and device tensors with every op on the do-nothing path (floor()). What the
    # device adds above it is its own modelled work (decisions, memory accounting, bf16 operand rounding, records).
    with floor():
        with torch.no_grad():  # the floor must compute what the CPU computes (it models no numerics)
            diff = (fwd_logits(dev, ids_n) - fwd_logits(cpu_model, ids)).abs().max().item()
        for label, f_cpu, f_flo in pairs:
            t_cpu, t_flo, ratio = paired(f_cpu, f_flo, args.repeats)
            print(f"{'floor ' + label:>18}: cpu {t_cpu * 1e3:8.2f} ms  floor  {t_flo * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
                  f"dispatched ops {_count_ops(f_flo):5d}  (the device's dispatcher replaced by unwrap/run/wrap)")
    print(f"{'':>18}  floor forward logits vs CPU: max abs diff {diff:.1e}")
    # Graph capture: the compiled graph runs the lowered ops on the host data with no per-op device dispatch.
    t_cpu, t_comp, ratio = paired(fwd_cpu, fwd_compiled, args.repeats)
    print(f"{'fwd compiled':>12}: cpu {t_cpu * 1e3:8.2f} ms  neuron {t_comp * 1e3:8.2f} ms  ratio {ratio:5.2f}x  "
          f"(torch.compile(backend='neuron') vs CPU eager; {neuron_backend.compile_stats()})")


if __name__ == "__main__":
    main()
