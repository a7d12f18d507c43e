"""Validation time of hostile config.json uploads: every one must be refused, p99 < 100 ms, and the pure cap check
under 50 ms on every input (issue 13, Build 5).

    .venv/bin/python bench/bench_validation.py [--repeat 3]

Each config is validated from its bytes as the API does (``parse_config`` + ``check_config``, in-process, after one
warm-up validation so Transformers' registry is loaded: the API's steady state). Also prints, for scale, the time of
the largest config the caps admit (256 layers, built on the meta device). Exit code 1 if a target is missed or a
hostile config is accepted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.config_limits import CapExceeded, check_caps  # noqa: E402 - after the path is set
from service.validation import InvalidInput, check_config, parse_config  # noqa: E402

UPLOAD_CAP = 256 * 1024  # the default COMPAT_MAX_UPLOAD_BYTES
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "vocab_size": 128256, "max_position_embeddings": 131072}
MPT = {"model_type": "mpt", "architectures": ["MptForCausalLM"], "d_model": 4096, "n_heads": 32, "n_layers": 32}
COUNT_FIELDS = ["num_hidden_layers", "n_layers", "n_layer", "num_layers", "num_blocks", "num_local_experts",
                "num_experts", "n_routed_experts", "moe_num_experts", "num_attention_heads", "n_heads", "n_head",
                "num_key_value_heads", "kv_n_heads", "vocab_size", "hidden_size", "d_model", "n_embd",
                "intermediate_size", "ffn_dim", "max_position_embeddings", "max_seq_len", "n_positions",
                "seq_length", "sliding_window", "head_dim", "moe_intermediate_size"]
HUGE = [10**9, 2**31, 2**63, 10**30]  # above every cap (the largest, sequence length, is 16,777,216)
# Fields LlamaConfig itself declares as int: a non-int there is Transformers' to refuse (strict dataclass).
LLAMA_INTS = ["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size", "hidden_size",
              "intermediate_size", "max_position_embeddings"]


def hostile() -> list[tuple[str, bytes]]:
    out: list[tuple[str, dict | bytes]] = []
    for name in COUNT_FIELDS:
        for value in HUGE:
            out.append((f"{name}={value}", {**LLAMA, name: value}))
            out.append((f"text_config.{name}={value}", {**LLAMA, "text_config": {name: value}}))
        out.append((f"mpt attn_config.{name}", {**MPT, "attn_config": {name: 10**9}}))
        if name != "sliding_window":  # -1 style windows are legal
            out.append((f"{name}=-5", {**LLAMA, name: -5}))
    for name in LLAMA_INTS:
        for label, value in (("NaN", math.nan), ("Infinity", math.inf), ("2.5", 2.5), ("str", "4096")):
            out.append((f"{name}={label}", {**LLAMA, name: value}))
    out += [
        ("mpt n_layers=2000", {**MPT, "n_layers": 2000}),
        ("llama 1024 layers (the old cap)", {**LLAMA, "num_hidden_layers": 1024}),
        ("experts x layers", {**LLAMA, "num_hidden_layers": 256, "num_local_experts": 4096}),
        ("pattern 200k", {**LLAMA, "hybrid_override_pattern": "M*-" * 60_000}),
        ("layer_types 20k", {**LLAMA, "layer_types": ["full_attention"] * 20_000}),
        ("intermediate list of huge", {**LLAMA, "intermediate_size": [10**9] * 4000}),
        ("int list at the byte cap", {**LLAMA, "x": [0] * (UPLOAD_CAP // 2 - 1000)}),
        ("20k keys", {**LLAMA, **{f"k{i}": i for i in range(20_000)}}),
        ("remote code (kimi_k2)", {**LLAMA, "model_type": "kimi_k2", "auto_map": {"AutoConfig": "c.C"}}),
        ("remote code (unknown class)", {**LLAMA, "architectures": ["EvilForCausalLM"]}),
        ("BertModel", {**LLAMA, "model_type": "bert", "architectures": ["BertModel"]}),
        ("LlamaModel", {**LLAMA, "architectures": ["LlamaModel"]}),
        ("PreTrainedModel", {**LLAMA, "architectures": ["PreTrainedModel"]}),
        ("no model_type", {k: v for k, v in LLAMA.items() if k != "model_type"}),
        ("architectures not a list", {**LLAMA, "architectures": "LlamaForCausalLM"}),
        ("heads not dividing hidden", {**LLAMA, "num_attention_heads": 31}),
        ("yarn without factor", {**LLAMA, "rope_scaling": {"rope_type": "yarn"}}),
        ("over the parameter limit", {**LLAMA, "vocab_size": 4_000_000, "hidden_size": 131_072}),
    ]
    nested: dict = {}
    node = nested
    for _ in range(50):
        node["c"] = {}
        node = node["c"]
    out.append(("nested 50 deep", {**LLAMA, "deep": nested}))
    encoded = [(label, json.dumps(cfg).encode()) for label, cfg in out]
    encoded.append(("nested 100k deep (JSON)", b'{"a":' * 100_000 + b"1" + b"}" * 100_000))
    encoded.append(("not JSON", b"\xff\xfe" * 1000))
    return [(label, raw) for label, raw in encoded if len(raw) <= UPLOAD_CAP]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, math.ceil(p / 100 * len(values)) - 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    check_config({**LLAMA, "num_hidden_layers": 2}, 10**13)  # warm-up: torch, transformers, the registry
    cases = hostile()
    times: list[float] = []
    cap_times: list[float] = []
    accepted: list[str] = []
    slowest = ("", 0.0)
    for _ in range(args.repeat):
        for label, raw in cases:
            t0 = time.perf_counter()
            try:
                check_config(parse_config(raw, UPLOAD_CAP), 10**12)
                accepted.append(label)
            except InvalidInput:
                pass
            took = (time.perf_counter() - t0) * 1000
            times.append(took)
            if took > slowest[1]:
                slowest = (label, took)
            try:
                cfg = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(cfg, dict):
                t0 = time.perf_counter()
                try:
                    check_caps(cfg)
                except CapExceeded:
                    pass
                cap_times.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    largest = check_config({**LLAMA, "num_hidden_layers": 256}, 10**13)
    largest_s = time.perf_counter() - t0
    p50, p99 = statistics.median(times), pct(times, 99)
    print(f"hostile configs: {len(cases)} x {args.repeat}  refused: {len(times) - len(accepted)}/{len(times)}")
    print(f"validation: p50 {p50:.2f} ms  p99 {p99:.2f} ms  max {max(times):.2f} ms ({slowest[0]})  target p99 < 100")
    print(f"pure cap check: p50 {statistics.median(cap_times):.3f} ms  max {max(cap_times):.2f} ms  target < 50")
    print(f"largest admitted config (Llama 8B shape at 256 layers, {largest.params / 1e9:.0f}B params, meta build): "
          f"{largest_s:.2f} s")
    print(f"load average at start: {load:.1f}  end: {os.getloadavg()[0]:.1f}  cores: {os.cpu_count()}")
    for label in sorted(set(accepted)):
        print(f"ACCEPTED (should be refused): {label}")
    return 1 if accepted or p99 >= 100 or max(cap_times) >= 50 else 0


if __name__ == "__main__":
    sys.exit(main())
