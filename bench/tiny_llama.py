"""The tiny Llama the device benchmarks time, and their pairing of CPU and device runs.

Shared by bench_backend.py (the simulated device) and bench_cpp_device.py (the C++ prototype); imports no device.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from transformers import LlamaConfig, LlamaForCausalLM

CLOCK: list[Callable[[], float]] = [time.perf_counter]  # bench_backend's --clock cpu swaps in time.thread_time


def model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg).eval()


def runs(m: LlamaForCausalLM, ids: torch.Tensor, new_tokens: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """(no-grad forward, greedy generate of ``new_tokens``) of ``m`` on ``ids``."""
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)

    def fwd() -> None:
        with torch.no_grad():
            m(ids)

    def gen() -> None:
        m.generate(ids, attention_mask=torch.ones_like(ids), **kw)

    return fwd, gen


def _once(fn: Callable[[], None]) -> float:
    clock = CLOCK[0]
    t0 = clock()
    fn()
    return clock() - t0


def paired(f_cpu: Callable[[], None], f_dev: Callable[[], None], repeats: int) -> tuple[float, float, float]:
    """Median CPU time, median device time, and the median of per-pair ratios. CPU and device runs alternate, so
    a shift in machine speed (this shared box drifts ~1.4x within the hour) hits both sides of each ratio alike."""
    f_cpu(), f_dev()  # warm caches (decisions, allocator)
    cpu, dev = [], []
    for _ in range(repeats):
        cpu.append(_once(f_cpu))
        dev.append(_once(f_dev))
    return statistics.median(cpu), statistics.median(dev), statistics.median(d / c for c, d in zip(cpu, dev, strict=True))
