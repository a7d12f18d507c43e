"""The hand-written, cited part of the profiles: hardware, dtypes, known issues and the documented decisions.

Each value names a source id of docs_excerpts.json; build.py merges this with the extracted op registrations.
"""

from __future__ import annotations

import torch

GIB = 1 << 30

HARDWARE: dict[str, dict] = {
    "trn2": {
        "summary": "Native TorchNeuron on Trainium2 (8 NeuronCore-v3, 96 GiB HBM per chip). Op table: the April 2026 "
                   "pre-release torch-neuronx source (version 0.1.0, for torch 2.10; INDICATIVE), corrected where real "
                   "Trn2 runs of torch-neuronx 2.11.3-2.12.3 (Beta 3) disagree (observations.json); rules from the "
                   "Neuron 2.33 docs. Not the op table of any release. Ops with a Neuron implementation run natively; "
                   "every other op runs on the CPU by default (warned once, recorded); quantized variants are "
                   "unsupported.",
        "generation": "Trn2", "neuroncore": "NeuronCore-v3", "cores_per_chip": 8, "hbm_per_chip_bytes": 96 * GIB,
        "lnc_default": 2, "sources": ["docs-trn2-nki", "docs-ncv3", "docs-trn2-lnc"],
    },
    "trn3": {
        "summary": "Native TorchNeuron on Trainium3 (8 NeuronCore-v4, 144 GiB HBM per chip). Same op table as trn2 "
                   "(the April 2026 pre-release torch-neuronx source, version 0.1.0 for torch 2.10, registers ops per "
                   "backend, not per generation), with trn2's corrections from real Trn2 runs: no Trn3 run is on "
                   "record, so whether they hold on Trn3 is unknown. Not the op table of any release.",
        "generation": "Trn3", "neuroncore": "NeuronCore-v4", "cores_per_chip": 8, "hbm_per_chip_bytes": 144 * GIB,
        "lnc_default": 2, "lnc_default_confidence": "low",
        "lnc_default_note": "the Trn3 default LNC is not in the retrieved docs (unknown); taken as on Trn2",
        "sources": ["docs-trn3-nki", "docs-ncv4", "docs-trn3-lnc"],
    },
    "legacy-xla": {
        "summary": "HISTORICAL: the legacy torch-neuronx (PyTorch/XLA) 'Supported Operators' page (41 aten ops, "
                   "unchanged since 2022) on Trn1 (2 NeuronCore-v2, 32 GiB per chip). Never a strict allow-list.",
        "generation": "Trn1", "neuroncore": "NeuronCore-v2", "cores_per_chip": 2, "hbm_per_chip_bytes": 32 * GIB,
        "lnc_default": 1, "sources": ["docs-trn1", "docs-trn1-lnc"],
    },
}

_ALL = ["float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8", "int16", "int32",
        "int64", "float64", "bool"]
DTYPES = {
    "note": "float64/int64 are in the groups because dispatch casts them to float32/int32 at op inputs "
            "(input_autocast) before the op runs; complex reaches ops only when complex decomposition is off.",
    "groups": {
        "all": _ALL,
        "float": ["float32", "bfloat16", "float16", "float64"],
        "any": _ALL + ["complex64", "complex128"],
        "xla": _ALL,
        "int32_64": ["int32", "int64"],
    },
}


def rejected_dtypes(profile: str) -> dict[str, dict]:
    """The FP8 'fnuz' dtypes neuronx-cc rejects (NCC_EVRF005), for every generation the error page covers; for the
    XLA-era profile also complex (NCC_EVRF004), which TorchNeuron decomposes instead."""
    out = {}
    for name in ("float8_e4m3fnuz", "float8_e5m2fnuz"):
        if isinstance(getattr(torch, name, None), torch.dtype):
            out[name] = {"reason": f"neuronx-cc rejects {name.upper()} (NCC_EVRF005: F8E4M3FNUZ, F8E4M3B11FNUZ and "
                                   "F8E5M2FNUZ are not supported)", "source": "docs-evrf005"}
    # float8_e4m3fn / float8_e5m2 are not rejected in eager on Trn2 (see DECISIONS "float8 on Trn2"): eager fp8
    # matmul runs in both encodings there (obs:E_xpu_perf_readme); compiled e4m3fn is compile_rejects' EVRF051.
    if profile == "legacy-xla":  # no framework complex decomposition before TorchNeuron
        for name in ("complex32", "complex64", "complex128"):
            out[name] = {"reason": "neuronx-cc: complex data types are not supported on the Neuron device "
                                   "(NCC_EVRF004); the XLA-era torch-neuronx had no complex decomposition",
                         "source": "docs-evrf004"}
    return out


_QUANTIZED_PREFIXES = ("quantize_per_", "dequantize", "q_", "int_repr", "_make_per_", "quantized_", "qscheme",
                       "_empty_affine_quantized", "_empty_per_channel_affine_quantized", "fbgemm_")


def unsupported_ops() -> list[str]:
    """ATen quantized-tensor ops of the installed torch: the docs' N class ('Quantized operator variants')."""
    return sorted(n for n in aten_op_names() if n[len("aten::"):].startswith(_QUANTIZED_PREFIXES))


def aten_op_names() -> list[str]:
    """Every ``aten::`` op name the installed torch registers (``dir(torch.ops.aten)`` lists only loaded ones)."""
    return sorted({n.split(".")[0] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")})


_MATMUL_DECISION = {
    "dtypes": "float", "confidence": "low",
    "decision": "native for floating inputs only; integer inputs fall back to the CPU. The source's matmul "
                "registrations carry no dtype check, but the Tensor Engine takes only floating formats "
                "(docs-ncv3, docs-ncv4); what the real device does with integer matmul is unknown.",
    "decision_sources": ["src-registrations", "docs-ncv3", "docs-ncv4"],
}
NATIVE_DTYPE_DECISIONS: dict[str, dict] = {
    "aten::histc": {
        "dtypes": "float", "confidence": "low",
        "decision": "native for floating inputs (src-histc). Integer histc is cpu_fallback, not native: the "
                    "source's kernel has no dtype check and would count in the input dtype, but PyTorch's CPU kernel "
                    "has no integer histc (pytorch-histc-cpu), so a native claim could not be checked against the CPU "
                    "reference. On the simulated device the fallback computes it in a wider dtype (fallback.py), which "
                    "gives the counts the source's kernel would; the CPU reference itself raises, so a harness that "
                    "compares with the CPU blames the reference, not the device.",
        "decision_sources": ["src-histc", "pytorch-histc-cpu"],
    },
    **{op: dict(_MATMUL_DECISION) for op in ("aten::mm", "aten::bmm", "aten::addmm", "aten::addmv", "aten::mv",
                                             "aten::dot", "aten::linear", "aten::convolution")},
}

# Real-hardware records (observations.json, loaded by neuron_backend/hardware/observations.py) this file cites, by their id
# there; build.py turns each into a profile source "obs:<id>" with its repo, path and commit.
EVIDENCE_SOURCES = ("A_history", "A_moe_router_patch", "A_deepseek_runlog", "A_environment", "A_neuron_worker",
                    "C_error_codes", "C_environment", "D_grpo_guideline", "E_xpu_perf_readme", "E_xpu_perf_impl")

INTEGER = ["int8", "uint8", "int16", "int32", "int64"]
MATMUL_OPS = ["aten::mm", "aten::bmm", "aten::addmm", "aten::addmv", "aten::mv", "aten::dot", "aten::linear",
              "aten::baddbmm", "aten::addbmm"]
EAGER_MATMUL_OPS = MATMUL_OPS[:7]  # those with a float-only native entry (NATIVE_DTYPE_DECISIONS); the rest fall back
SCATTER_COMPUTE_OPS = ["aten::scatter_add", "aten::scatter_add_", "aten::index_add", "aten::index_add_",
                       "aten::embedding_dense_backward", "aten::nll_loss_backward"]


def compile_rejects(profile: str) -> list[dict]:
    """neuronx-cc's default rejects of a compiled graph, by error code: an op whose data operand (the first tensor
    argument) has one of ``dtypes``. Official error pages; what the same op does in eager is not stated anywhere
    (see the switches integer_matmul_eager and integer_scatter_compute_eager)."""
    out = [
        {"code": "NCC_EVRF035", "ops": MATMUL_OPS, "dtypes": ["int32", "int64"], "source": "docs-evrf035",
         "reason": "dot (matmul) does not support 32-bit or 64-bit integer operands on Trainium2 and later "
                   "(int64 on every target); the compiler rejects it by default"},
        {"code": "NCC_EVRF060", "ops": SCATTER_COMPUTE_OPS, "dtypes": ["int32", "int64"], "source": "docs-evrf060",
         "reason": "scatter-with-compute (scatter_add, index_add, embedding_dense_backward, nll_loss_backward) "
                   "does not support integer operands: emulated in f32, rejected by default"},
        {"code": "NCC_EVRF016", "ops": ["aten::scatter_reduce", "aten::scatter_reduce_"],
         "dtypes": [*INTEGER, "bool"], "source": "docs-evrf016",
         "reason": "scatter-reduce cannot reduce integer or boolean data"},
    ]
    if profile == "trn2":
        out.append({"code": "NCC_EVRF051", "ops": [], "dtypes": ["float8_e4m3fn"], "source": "docs-evrf051",
                    "reason": "Data type F8E4M3FN is not supported on TRN1/TRN2 (native on Trn3 and later); "
                              "real Trn2 compiles fail on it while float8_e5m2 compiles and runs "
                              "(obs:E_xpu_perf_readme)"})
    return out


# The SDPA lowering on real Trn2 (torch-neuronx 2.12.3): a fused NKI flash kernel behind a gate, else the math
# decomposition on the device. attention.py reads it (nki_sdpa_applies).
SDPA = {
    "fused_gate": {"same_kv_shape": True, "mask": None, "dropout_p": 0.0, "q_len_multiple": 512,
                   "kv_len_multiple": 512, "head_dim_max": 128, "batch_heads_max": 512},
    "switch_env": "TORCH_NEURONX_ENABLE_NKI_SDPA", "switch_default": True,
    "otherwise": "the math decomposition runs op by op on the device (what the simulation runs in both cases; the "
                 "fused kernel's own numerics are unknown)",
    "source": "obs:E_xpu_perf_readme", "confidence": "medium",
    "note": "_can_use_nki_flash_attention in torch_neuronx/neuron_dynamo_backend/decompositions.py as quoted by the "
            "source; the April pre-release source's gate is looser (L and S multiples of 128): it changes between "
            "builds",
}

_NCC_EVRF013 = ("[NCC_EVRF013] TopK custom operation does not support 32-bit and 64-bit integer types: torch-neuronx "
                "lowers sort/topk/argsort to the AwsNeuronTopK custom op, which rejects integer inputs (seen on real "
                "Trn2 from torch.sort(expert_ids) in transformers/integrations/moe.py; the model failed, no CPU retry)")
KNOWN_ISSUES: list[dict] = [
    {
        "op": "aten::_grouped_mm", "precondition": "grouped_mm_128_alignment_bf16", "dtypes": None,
        "error": "ValueError", "cpu_retry": False, "confidence": "medium", "source": "src-grouped-mm",
        "also": ["obs:A_deepseek_runlog"],
        "reason": "the Neuron _grouped_mm (2D x 2D, 2D x 3D) requires the grouped dimension and every offs entry "
                  "to be multiples of 128, offs in range and sorted, and bfloat16 inputs (no fp32 path); otherwise "
                  "it raises ValueError before any CPU fallback (TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1 skips the "
                  "check)",
        "note": "alignment from the pre-release source; both alignment ('ValueError: t must be divisible by 128') and "
                "bf16-only seen on real Trn2 with torch-neuronx 2.12.3 (Beta 3, DeepSeek-V4 runlog). Neuron 2.34 "
                "changed MoE support (docs-release-notes): switch grouped_mm_preconditions.",
    },
    *({"op": op, "dtypes": "int32_64", "error": "RuntimeError", "cpu_retry": False, "confidence": "medium",
       "source": "obs:A_history", "also": ["obs:A_moe_router_patch"], "reason": _NCC_EVRF013,
       "note": "captured on OLMoE (HISTORY.tsv); A's moe_router_patch routes every integer sort/topk/argsort through "
               "float32 for this reason. Switch integer_sort_topk."}
      for op in ("aten::sort", "aten::topk", "aten::argsort")),
]

# Ops the real-hardware records show running on the device where the pre-release source has no registration.
EVIDENCE_OPS: dict[str, dict] = {
    "aten::normal_": {"class": "cpu_fallback", "source": "obs:E_xpu_perf_impl", "confidence": "medium",
                      "note": "real Trn2 (torch-neuronx 2.12.3): the only op get_fallback_ops() listed across a basic "
                              "op sweep; the pre-release source registers no normal_ either (same class)"},
    "aten::sort": {"class": "native", "dtypes": "all", "source": "obs:A_deepseek_runlog", "confidence": "medium",
                   "note": "real Trn2 (torch-neuronx 2.12.3) lowers torch.sort to the AwsNeuronTopK custom op on the "
                           "device (its integer failure is a known issue); the pre-release source registers no sort"},
}

# The decisions the headline depends on, as named switches: each option says what it models and cites its source;
# "default" is what the profile models. A run measures how many architectures each one moves (worker/orchestration/
# decisions.py): "rerun" = the affected architectures are run again with the other option, "traces" = it only moves
# an op between the device and the CPU fallback, so the stored fallback ops say what changes. "other_option": whether
# the non-default option lets more run ("permissive") or less ("strict"): the range's ends set all of one kind at once.
SWITCHES: list[dict] = [
    {"id": "integer_sort_topk", "other_option": "permissive", "subject": "sort/topk/argsort on 32/64-bit integers", "confidence": "medium",
     "ops": ["aten::sort", "aten::topk", "aten::argsort"], "dtypes": ["Int", "Long"], "measure": "rerun",
     "default": "fails",
     "options": {
         "fails": {"says": "NCC_EVRF013 on real Trn2 (torch-neuronx 2.12.3 era, SDK 2.28); MoE models failed on it",
                   "sources": ["obs:A_history", "obs:A_moe_router_patch"]},
         "runs": {"says": "the pre-release source: topk/argsort native for every dtype, sort on the CPU fallback",
                  "sources": ["src-registrations"],
                  "patch": {"drop_known_issues": ["aten::sort", "aten::topk", "aten::argsort"],
                            "drop_ops": ["aten::sort"]}}}},
    {"id": "grouped_mm_preconditions", "other_option": "permissive", "subject": "`_grouped_mm` 128-alignment and bf16-only", "confidence": "medium",
     "ops": ["aten::_grouped_mm"], "measure": "rerun", "default": "enforced",
     "options": {
         "enforced": {"says": "pre-release source's validate_offs; real Trn2 (Beta 3): 't must be divisible by 128', "
                              "bf16 only", "sources": ["src-grouped-mm", "obs:A_deepseek_runlog"]},
         "not_enforced": {"says": "Neuron 2.34 'adds device support for more of the PyTorch API' and MoE recipes use "
                                  "upstream torch._grouped_mm: the preconditions may be gone (not verified)",
                          "sources": ["docs-release-notes"], "patch": {"drop_known_issues": ["aten::_grouped_mm"]}}}},
    {"id": "complex_eager", "other_option": "strict", "subject": "complex dtypes in eager", "confidence": "medium", "measure": "rerun",
     "ops": [], "dtypes": ["ComplexFloat", "ComplexDouble"], "default": "decomposed",
     "options": {
         "decomposed": {"says": "TORCH_NEURONX_COMPLEX_DECOMPOSE defaults to True for PyTorch >= 2.13 (Neuron 2.33 "
                                "docs), which this torch is; the pre-release source decomposes too",
                        "sources": ["docs-env-vars"]},
         "raises": {"says": "real Trn2 on torch-neuronx 2.11.3 / torch 2.11: 'complex dtypes are not supported "
                            "natively on Neuron' (a toolchain before the documented default)",
                    "sources": ["obs:C_error_codes"],
                    "patch": {"complex_decompose_default": False,
                              "reject_dtypes": {n: {"reason": "complex dtypes are not supported natively on Neuron "
                                                              "(real Trn2, torch-neuronx 2.11.3)",
                                                    "source": "obs:C_error_codes"}
                                                for n in ("complex32", "complex64", "complex128")}}}}},
    {"id": "integer_matmul_eager", "other_option": "strict", "subject": "matmul on 32/64-bit integers in eager",
     "confidence": "low", "ops": EAGER_MATMUL_OPS, "dtypes": ["Int", "Long"], "measure": "rerun",
     "default": "cpu_fallback",
     "options": {
         "cpu_fallback": {"says": "the Tensor Engine takes only floating formats (docs-ncv3, docs-ncv4), so the "
                                  "eager op falls back to the CPU; whether real eager does that or fails is unknown",
                          "sources": ["docs-ncv3", "docs-ncv4", "src-registrations"]},
         "fails": {"says": "eager integer matmul fails as the compiler does (NCC_EVRF035, no CPU retry)",
                   "sources": ["docs-evrf035"],
                   "patch": {"set_ops": {op: {"class": "native", "dtypes": "all", "source": "docs-evrf035",
                                              "confidence": "low"} for op in EAGER_MATMUL_OPS},
                             "add_known_issues": [
                                 {"op": op, "precondition": "integer_data_operand", "dtypes": None,
                                  "error": "RuntimeError", "cpu_retry": False, "confidence": "low",
                                  "source": "docs-evrf035",
                                  "reason": "[NCC_EVRF035] Opcode (dot) does not support 32-bit or 64-bit integer "
                                            "operands on this target"} for op in EAGER_MATMUL_OPS]}}}},
    {"id": "integer_scatter_compute_eager", "other_option": "strict",
     "subject": "scatter-with-compute on integer data in eager (scatter_add, index_add, ...)", "confidence": "low",
     "ops": SCATTER_COMPUTE_OPS, "dtypes": ["Int", "Long"], "measure": "rerun", "default": "runs",
     "options": {
         "runs": {"says": "the pre-release source registers them for every dtype; eager behaviour on integers is "
                          "not stated anywhere", "sources": ["src-registrations"]},
         "fails": {"says": "eager integer scatter-with-compute fails as the compiler does (NCC_EVRF060, no CPU "
                           "retry)", "sources": ["docs-evrf060"],
                   "patch": {"add_known_issues": [
                       {"op": op, "precondition": "integer_data_operand", "dtypes": None, "error": "RuntimeError",
                        "cpu_retry": False, "confidence": "low", "source": "docs-evrf060",
                        "reason": "[NCC_EVRF060] Scatter does not support integer operands on this target"}
                       for op in SCATTER_COMPUTE_OPS]}}}},
    {"id": "argmax_device", "other_option": "permissive", "subject": "argmax on the device", "confidence": "low", "measure": "traces",
     "ops": ["aten::argmax"], "default": "cpu_fallback",
     "options": {
         "cpu_fallback": {"says": "the pre-release source registers no argmax: the CPU fallback runs it",
                          "sources": ["src-registrations"]},
         "native": {"says": "real Trn2 runs take argmax on the device and log no fallback (whether it fell back "
                            "unlogged is unknown)", "sources": ["obs:A_neuron_worker"],
                    "patch": {"set_ops": {"aten::argmax": {"class": "native", "dtypes": "all",
                                                           "source": "obs:A_neuron_worker", "confidence": "low"}}}}}},
]

DECISIONS: list[dict] = [
    {"subject": "aten::histc on integer inputs", "confidence": "low",
     "decision": NATIVE_DTYPE_DECISIONS["aten::histc"]["decision"], "sources": ["src-histc", "pytorch-histc-cpu"]},
    {"subject": "integer matmul (mm, bmm, addmm, addmv, mv, dot, linear, convolution) in eager",
     "confidence": "low", "decision": _MATMUL_DECISION["decision"] + " Compiled, NCC_EVRF035 rejects it "
                                                                     "(compile_rejects).",
     "sources": [*_MATMUL_DECISION["decision_sources"], "docs-evrf035"]},
    {"subject": "granularity", "confidence": "medium",
     "decision": "classes are per op name: an op with any registered overload counts native for all its overloads "
                 "(the registered overloads are listed per entry), and an in-place variant without its own entry "
                 "(sigmoid_) follows a native functional op (sigmoid); the simulator decides per op name.",
     "sources": ["src-registrations"]},
    {"subject": "ops with a CompositeExplicitAutograd kernel and no Neuron registration", "confidence": "medium",
     "decision": "class 'composite': they never reach the boxed fallback themselves; the simulator runs PyTorch's "
                 "decomposition where one exists (each inner op then decided on its own, e.g. randn -> normal_ "
                 "falls back) and otherwise the op directly, counted native.",
     "sources": ["pytorch-dispatcher", "src-boxed-fallback"]},
    {"subject": "an op without a Neuron implementation inside a torch.compile graph", "confidence": "low",
     "decision": "taken as lowered: the source's dynamo backend lowers a whole FX graph through torch-mlir to "
                 "StableHLO with its own decomposition table, not through the eager op table (src-dynamo-backend); "
                 "which ops it cannot lower is unknown. A graph fails to compile when it holds an unsupported op or "
                 "dtype, and in strict mode also an op without a Neuron implementation (so --strict measures native "
                 "coverage in compiled runs too). A failed graph raises while TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
                 "=1 (default, docs-env-vars) and runs eagerly, op by op, when it is 0.",
     "sources": ["src-dynamo-backend", "docs-env-vars", "docs-best-practices"]},
    {"subject": "float8 on Trn2", "confidence": "medium",
     "decision": "per type and mode: eager fp8 runs on trn2 in both encodings (real Trn2, torch-neuronx 2.12.3: a "
                 "software up-cast, slow); compiled, float8_e5m2 compiles and runs and float8_e4m3fn is rejected "
                 "(NCC_EVRF051, compile_rejects). This replaces the rejection of both types in every mode taken from "
                 "A's 'float8 is not in Beta 3' (an older toolchain's note, not a measurement). trn3 keeps both "
                 "(F8E4M3FN native on Trn3 and later per NCC_EVRF051); no Trn3 run is on record.",
     "sources": ["docs-evrf051", "obs:E_xpu_perf_readme", "obs:A_environment"]},
    {"subject": "integer matmul and scatter-with-compute", "confidence": "medium",
     "decision": "a compiled graph holding them on integer data is rejected (NCC_EVRF035, NCC_EVRF060, NCC_EVRF016: "
                 "compile_rejects). Eager behaviour is not stated anywhere: the switches integer_matmul_eager and "
                 "integer_scatter_compute_eager name it (defaults: matmul falls back to the CPU, scatter runs).",
     "sources": ["docs-evrf035", "docs-evrf060", "docs-evrf016"]},
    {"subject": "SDPA: fused kernel or decomposition", "confidence": "medium",
     "decision": "both run on the device: the 'sdpa' gate says when real Trn2 uses its fused NKI kernel; the "
                 "simulation runs PyTorch's math lowering either way (values of the fused kernel unknown); "
                 "attention.nki_sdpa_applies says which path the real device takes. No pass/fail verdict depends "
                 "on it: both paths run on the device.",
     "sources": ["obs:E_xpu_perf_readme"]},
    {"subject": "known issues from the release notes", "confidence": "low",
     "decision": "the TorchNeuron release notes' known-issues section could not be read here, so known_issues holds "
                 "what the source shows (grouped_mm alignment) and what real Trn2 runs recorded (grouped_mm bf16-only, "
                 "integer sort/topk/argsort NCC_EVRF013); the list is incomplete.",
     "sources": ["docs-release-notes", "src-grouped-mm", "obs:A_history", "obs:A_deepseek_runlog"]},
    {"subject": "op table source", "confidence": "low",
     "decision": "AWS's per-release table (docs/torch_api_compatibility.md) could not be had; the op classes come "
                 "from the April 2026 pre-beta source (INDICATIVE). Neuron 2.34 (11/30/2026) 'adds device support "
                 "for more of the PyTorch API', so the real native set is likely larger than this one.",
     "sources": ["docs-compat-table", "src-registrations", "docs-release-notes"]},
]

LEGACY_DECISION = {
    "subject": "what the legacy page means", "confidence": "medium",
    "decision": "the 41 page ops (plus view ops) are native; every other op is cpu_fallback (PyTorch/XLA ran ops "
                "without a lowering on the CPU), so the default sweep measures 'runs' and --strict measures 'only "
                "page ops'. Trailing-underscore page names (addcdiv_, bernoulli_, fill_, zero_) cover their functional "
                "op too, as the policy's in-place rule does.",
    "sources": ["docs-legacy-ops", "pytorch-xla-fallback"],
}

COMPILE = {
    "dynamic": {"value": "rejected", "source": "docs-compile-ref",
                "note": "dynamic=True is rejected; varying shapes recompile per shape"},
    "fullgraph": {"value": "supported; True raises on graph breaks", "source": "docs-compile-ref"},
    "graph_breaks": {"value": "allowed and counted; each subgraph compiled on its own", "source": "docs-about-compile"},
    "disable_fallback_execution_default": {
        "value": True, "source": "docs-env-vars",
        "note": "the April source snapshot listed False (src-env-vars-april); the Oct-2026 docs say True"},
    "item": {"value": "graph break (Dynamo), not a rejection", "source": "docs-compile-ref"},
}
