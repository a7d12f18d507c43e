"""A real-size plan for one model from its config.json alone: weight and KV-cache bytes, the smallest tensor-parallel
degree that fits one NeuronCore's memory, the NeuronCores and the smallest instance. Arithmetic only: nothing runs.

Pure: the parameter count (counted on the meta device by ``worker.build.real_size``) and the hardware (the active
device profile's figures, which cite the AWS docs) arrive as arguments. Every surface labels the result BASIS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

BASIS = "planned from config.json, not run"
DEFAULT_TOKENS = 4096
DEFAULT_BATCH = 1
DEFAULT_DTYPE = "bfloat16"  # what users load a config that names no dtype in (and what Neuron computes matmuls in)
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float8_e4m3fn": 1,
               "float8_e5m2": 1, "float64": 8}
# Layer kinds (Transformers' ``layer_types``) whose attention keeps a KV cache; the rest (linear attention, Mamba,
# GatedDeltaNet) keep a fixed-size state, counted here as nothing.
KV_LAYER_KINDS = {"full_attention": None, "attention": None, "sliding_attention": "sliding_window",
                  "chunked_attention": "attention_chunk_size"}
TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256)

# Instances by accelerator generation, smallest first: (name, chips). Only sizes the cited docs list; a size they do
# not list (e.g. trn2.3xlarge, named by real-hardware records but absent from the Trn2 architecture page) is left
# out rather than guessed.
INSTANCES: dict[str, tuple[tuple[str, int], ...]] = {
    # https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trn2-arch.html
    # ("trn2.48xlarge / trn2u.48xlarge: 16 Trainium2 chips"; "Trn2 UltraServer: 64").
    "Trn2": (("trn2.48xlarge", 16), ("Trn2 UltraServer", 64)),
    # https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trn3-arch.html
    # (Gen1 UltraServer: 4 servers x 16 Trainium3; Gen2: 36 servers x 4 = 144). Single-server instance names are not
    # in that page: unknown here.
    "Trn3": (("Trn3 Gen1 UltraServer", 64), ("Trn3 Gen2 UltraServer", 144)),
    # https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trn1-arch.html
    # (Trn1.2xlarge: 1 Trainium; Trn1.32xlarge: 16).
    "Trn1": (("trn1.2xlarge", 1), ("trn1.32xlarge", 16)),
}


@dataclass(frozen=True)
class PlanHardware:
    """The device the plan is for: the active profile's chip figures and Logical NeuronCore setting."""

    profile: str
    generation: str  # "Trn2", keys INSTANCES
    cores_per_chip: int  # physical NeuronCores
    hbm_per_chip_bytes: int
    lnc: int  # physical cores per logical NeuronCore
    sources: tuple[str, ...] = ()

    @property
    def logical_per_chip(self) -> int:
        return self.cores_per_chip // self.lnc

    @property
    def bytes_per_core(self) -> int:
        """HBM of one logical NeuronCore (the chip's HBM split evenly, as the simulated device sizes it)."""
        return self.hbm_per_chip_bytes // self.logical_per_chip


@dataclass
class Plan:
    parameters: int
    dtype: str
    weight_bytes: int
    kv_cache_bytes: int
    tensor_parallel: int | None  # None: no degree dividing the heads fits one core
    neuron_cores: int | None
    instance: str | None
    basis: str = BASIS
    tokens: int = DEFAULT_TOKENS
    batch: int = DEFAULT_BATCH
    bytes_per_core: int = 0  # the budget each shard had to fit
    shard_bytes: int | None = None  # weights/tp + cache/tp at the chosen degree
    profile: str = ""
    lnc: int = 0
    expert_parameters: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a config: ``text_config`` of a composite (VL) config, else the config."""
    sub = config.get("text_config")
    return sub if isinstance(sub, Mapping) else config


def _first(d: Mapping[str, Any], *names: str) -> Any:
    return next((d[n] for n in names if isinstance(d.get(n), int) and not isinstance(d.get(n), bool)), None)


def config_dtype(config: Mapping[str, Any]) -> str:
    """The config's own dtype (``torch_dtype`` or ``dtype``, the text part's where the top names none), else bf16."""
    for d in (config, text_config(config)):
        for key in ("torch_dtype", "dtype"):
            value = d.get(key)
            if isinstance(value, str) and value.removeprefix("torch.") in DTYPE_BYTES:
                return value.removeprefix("torch.")
    return DEFAULT_DTYPE


def attention_shape(config: Mapping[str, Any]) -> tuple[int | None, int | None, int | None, int | None]:
    """(layers, attention heads, KV heads, head dim) of the language model, as the config names them."""
    t = text_config(config)
    layers = _first(t, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = _first(t, "num_attention_heads", "n_head", "num_heads", "n_heads")
    kv = _first(t, "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num")
    if kv is None and heads is not None:
        kv = 1 if t.get("multi_query") is True else heads
    hidden = _first(t, "hidden_size", "n_embd", "d_model")
    head_dim = _first(t, "head_dim", "kv_channels")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    return layers, heads, kv, head_dim


def kv_cache_bytes(config: Mapping[str, Any], tokens: int = DEFAULT_TOKENS, batch: int = DEFAULT_BATCH,
                   dtype: str | None = None) -> int:
    """Keys and values for ``tokens`` positions of ``batch`` sequences, as Transformers' cache holds them: per
    attention layer 2 x KV heads x head dim (MLA: the up-projected keys and values, heads x (qk head dim + v head
    dim)); sliding/chunked layers up to their window; linear-attention and state-space layers none."""
    t = text_config(config)
    layers, heads, kv, head_dim = attention_shape(config)
    if not layers or not heads:
        return 0
    size = DTYPE_BYTES[dtype or config_dtype(config)]
    if isinstance(t.get("kv_lora_rank"), int):  # MLA (DeepSeek-V2/V3): DynamicCache keeps the decompressed k and v
        qk = (t.get("qk_nope_head_dim") or 0) + (t.get("qk_rope_head_dim") or 0)
        per_token = heads * (qk + (t.get("v_head_dim") or qk))
    else:
        per_token = 2 * (kv or heads) * (head_dim or 0)
    kinds = t.get("layer_types")
    if not isinstance(kinds, list) or not kinds:
        kinds = ["full_attention"] * layers
    total = 0
    for kind in kinds[:layers]:
        if kind not in KV_LAYER_KINDS:
            continue
        window_key = KV_LAYER_KINDS[kind]
        window = t.get(window_key) if window_key else None
        held = min(tokens, window) if isinstance(window, int) and window > 0 else tokens
        total += per_token * held
    return total * batch * size


def kv_shards(heads: int | None, kv: int | None, tp: int) -> int | None:
    """Into how many parts degree ``tp`` splits the KV cache, or None when ``tp`` is not a valid degree: it must
    divide the attention heads, and the KV heads must divide by it or it by them (each KV head then held by tp/kv
    ranks, as tensor-parallel inference replicates them: Qwen3.5-35B-A3B, 16 heads and 2 KV heads, ran at tp16 on
    trn2, arminagha1234/trainium-optimizer optimized_models/qwen3-5-35b-a3b/trn2.48xlarge/RECIPE.md @ 6891802b)."""
    if not heads or tp == 1:
        return 1
    kv = kv or heads
    if heads % tp:
        return None
    if kv % tp == 0:
        return tp
    return kv if tp % kv == 0 else None


def smallest_instance(generation: str, chips: int) -> str | None:
    return next((name for name, n in INSTANCES.get(generation, ()) if n >= chips), None)


def plan_model(config: Mapping[str, Any], parameters: int, hardware: PlanHardware, *, tokens: int = DEFAULT_TOKENS,
               batch: int = DEFAULT_BATCH, expert_parameters: int = 0, replicate_experts: bool = False) -> Plan:
    """The plan: weights at the config's dtype, the KV cache for ``tokens`` x ``batch``, and the smallest
    tensor-parallel degree valid for the heads (``kv_shards``) that puts weights/tp plus its part of the cache
    within one logical NeuronCore's HBM. ``replicate_experts``: every rank holds all experts (how MoE models first ran on
    real Trn2, and went out of memory)."""
    dtype = config_dtype(config)
    size = DTYPE_BYTES[dtype]
    weights = parameters * size
    cache = kv_cache_bytes(config, tokens, batch, dtype)
    _, heads, kv, _ = attention_shape(config)
    budget = hardware.bytes_per_core
    notes = []
    if text_config(config).get("quantization_config") or config.get("quantization_config"):
        notes.append("quantization_config ignored: weights counted at the config's dtype")
    if replicate_experts and expert_parameters:
        notes.append("experts replicated on every rank")
    max_cores = max((n for _, n in INSTANCES.get(hardware.generation, ())), default=1) * hardware.logical_per_chip
    chosen = shard = None
    for tp in TP_CANDIDATES:
        if tp > max_cores:
            break
        kv_split = kv_shards(heads, kv, tp)
        if kv_split is None:
            continue
        experts = expert_parameters * size if replicate_experts else 0
        need = math.ceil((weights - experts) / tp) + experts + math.ceil(cache / kv_split)
        if need <= budget:
            chosen, shard = tp, need
            break
    if chosen is None:
        notes.append("no tensor-parallel degree that divides the heads fits one NeuronCore")
    chips = math.ceil(chosen * hardware.lnc / hardware.cores_per_chip) if chosen else None
    instance = smallest_instance(hardware.generation, chips) if chips else None
    if chips and instance is None:
        notes.append(f"no cited {hardware.generation} instance holds {chips} chips")
    return Plan(parameters=parameters, dtype=dtype, weight_bytes=weights, kv_cache_bytes=cache,
                tensor_parallel=chosen, neuron_cores=chosen, instance=instance, tokens=tokens, batch=batch,
                bytes_per_core=budget, shard_bytes=shard, profile=hardware.profile, lnc=hardware.lnc,
                expert_parameters=expert_parameters, notes=notes)


def plan_text(plan: Mapping[str, Any]) -> str:
    """One line: '8.03 B params, bf16 16.1 GB + KV 0.5 GB (4096 tok): tp1 on 1 NeuronCore, trn2.48xlarge'."""
    gb = 1e9
    head = (f"{plan['parameters'] / 1e9:.2f} B params, {plan['dtype']} {plan['weight_bytes'] / gb:.1f} GB + KV "
            f"{plan['kv_cache_bytes'] / gb:.2f} GB ({plan['tokens']} tok x {plan['batch']})")
    if not plan.get("tensor_parallel"):
        return f"{head}: does not fit ({'; '.join(plan.get('notes') or [])}) [{plan['basis']}]"
    cores = plan["neuron_cores"]
    return (f"{head}: tp{plan['tensor_parallel']} on {cores} NeuronCore{'s' if cores > 1 else ''} "
            f"(LNC={plan['lnc']}, {plan['bytes_per_core'] / gb:.1f} GB each), {plan['instance'] or 'no cited instance'}"
            f" [{plan['basis']}]")
