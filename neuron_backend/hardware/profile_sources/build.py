"""Generate the device profiles (neuron_backend/hardware/profiles/{trn2,trn3,legacy-xla}.json) from the committed, cited source
snapshots in this folder: ``python -m neuron_backend.hardware.profile_sources.build``. Reads no network; needs the installed torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from neuron_backend.hardware.profile_sources import rules

HERE = Path(__file__).parent
OUT = HERE.parent / "profiles"
GIB = 1 << 30


def _evidence_sources() -> dict[str, dict]:
    """The real-hardware records rules.py cites, as profile sources ``obs:<id>`` (repo + path + commit)."""
    found = json.loads((HERE / "observations.json").read_text())["sources"]
    out = {}
    for key in rules.EVIDENCE_SOURCES:
        s = found[key]
        out[f"obs:{key}"] = {"ref": f"github.com/{s['repo']} @ {s['commit']}: {s['path']}", "says": s["note"],
                             "retrieved": "full" if s["verified"] else "no", "verified_at_commit": s["verified"],
                             "indicative": False, "real_hardware": True}
    return out


def _load() -> tuple[dict, dict, list[str]]:
    docs = {**json.loads((HERE / "docs_excerpts.json").read_text())["sources"], **_evidence_sources()}
    src = json.loads((HERE / "torch_neuronx_source.json").read_text())
    legacy = [ln.strip() for ln in (HERE / "legacy_xla_supported_operators.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    return docs, src, legacy


def _base(name: str) -> str:
    return name.split(".")[0]


def _exists(op: str) -> bool:
    return isinstance(getattr(torch.ops.aten, op[len("aten::"):], None), torch._ops.OpOverloadPacket)


def _is_out(op) -> bool:
    s = op._schema
    return op._overloadname.endswith("out") or any(
        a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in s.arguments)


def _composites() -> tuple[set[str], set[str]]:
    """(view ops, other ops) whose every overload that reaches a backend (not out=, not CompositeImplicitAutograd)
    has a CompositeExplicitAutograd kernel in the installed torch, or that are CompositeImplicitAutograd only
    (source pytorch-dispatcher). Out= overloads are left out: PyTorch autogenerates them as composites even where
    the functional op has per-backend kernels."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    views, others = set(), set()
    for name in rules.aten_op_names():
        packet = getattr(torch.ops.aten, name[len("aten::"):], None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        reaching, all_views, implicit = [], True, False
        for ov in packet.overloads():
            op = getattr(packet, ov)
            try:
                if _is_out(op):
                    continue
                if has(op.name(), "CompositeImplicitAutograd"):
                    implicit = True
                    continue
                reaching.append(has(op.name(), "CompositeExplicitAutograd"))
            except RuntimeError:  # a schema-only overload (aten::__and__.bool)
                continue
            s = op._schema
            is_view = bool(s.returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in s.returns)
            writes = any(a.alias_info is not None and a.alias_info.is_write for a in s.arguments)
            all_views = all_views and is_view and not writes
        if reaching and all(reaching):
            (views if all_views else others).add(name)
        elif not reaching and implicit:  # decomposes above the backend (reshape, layer_norm, dropout)
            others.add(name)
    return views, others


def _native_ops(src: dict) -> tuple[dict[str, dict], list[str]]:
    """Registered ATen names grouped by op name, with their overloads and file:line; names unknown to torch apart."""
    ops: dict[str, dict] = {}
    missing = []
    for full, where in src["native"].items():
        op = _base(full)
        if not _exists(op):
            missing.append(full)
            continue
        e = ops.setdefault(op, {"class": "native", "dtypes": "all", "source": "src-registrations",
                                "overloads": [], "where": []})
        e["overloads"].append(full[len(op) + 1:] or "default")
        e["where"] = sorted(set(e["where"]) | set(where))
    return ops, sorted(missing)


def _torchneuron(name: str, docs: dict, src: dict) -> dict:
    ops, missing = _native_ops(src)
    views, others = _composites()
    for op in sorted(views):
        ops.setdefault(op, {"class": "native", "dtypes": "any", "source": "pytorch-dispatcher",
                            "note": "view with a CompositeExplicitAutograd kernel (over as_strided/view, which the "
                                    "source registers: NeuronBindings.cpp:428-431)"})
    for op in sorted(others):
        if op not in ops:
            ops[op] = {"class": "composite", "dtypes": "any", "source": "pytorch-dispatcher"}
    for op, where in src["untracked_views"].items():
        if _exists(op) and ops.get(op, {}).get("class") != "native":
            ops[op] = {"class": "native", "dtypes": "any", "source": "src-view-whitelist", "where": [where],
                       "note": "view the boxed fallback runs without a warning and without tracking it in "
                               "get_fallback_ops() (VIEW_OPS_WHITELIST): metadata only, not a CPU fallback"}
    for op, where in src["cpu_fallback"].items():
        ops[op] = {"class": "cpu_fallback", "source": "src-cpu-fallback-registrations", "where": [where]}
    for op, entry in rules.NATIVE_DTYPE_DECISIONS.items():
        ops[op] = {**ops[op], **entry}
    for op, entry in rules.EVIDENCE_OPS.items():
        ops[op] = {**entry, "replaces": ops.get(op, {"class": "cpu_fallback (no registration)"})["class"]}
    for op in rules.unsupported_ops():
        ops[op] = {"class": "unsupported", "source": "docs-supported-operators", "confidence": "medium",
                   "note": "quantized operator variant: the docs' N class names 'Quantized operator variants'"}
    hw = rules.HARDWARE[name]
    newest = "2026-11-06"  # docs-supported-operators, the newest dated source used
    return {
        "name": name,
        "summary": hw["summary"],
        "historical": False,
        "confidence": "Op classes come from the April 2026 pre-release torch-neuronx source's registrations "
                      "(version 0.1.0, torch 2.10; INDICATIVE, not a release) because AWS's per-release table "
                      "(docs/torch_api_compatibility.md) could not be had; where real Trn2 runs (torch-neuronx "
                      "2.11.3-2.12.3, observations.json) disagree, the evidence wins and says so ('obs:' sources). "
                      "The rules (CPU fallback by default, dtype autocast, compile semantics) come from the Neuron "
                      "2.33 docs. Decisions the headline depends on are named switches ('switches'); the rest are "
                      "listed under 'decisions'.",
        "op_table_from": "torch-neuronx 0.1.0 pre-release source (April 2026, torch 2.10), corrected by real Trn2 "
                         "runs of torch-neuronx 2.11.3 and 2.12.3 (Beta 3)",
        "source_date": newest,
        "generated_by": "python -m neuron_backend.hardware.profile_sources.build",
        "sources": docs,
        "hardware": {k: v for k, v in hw.items() if k != "summary"},
        "dtypes": rules.DTYPES,
        "input_autocast": {"map": {"float64": "float32", "int64": "int32"}, "source": "src-dtype-autocast",
                           "note": "0-d tensors are not cast (dtype_autocast.py:52 'value.ndim != 0')"},
        "rejected_dtypes": rules.rejected_dtypes(name),
        "complex_decompose_default": {"value": True, "source": "docs-env-vars"},
        "matmul_autocast": {"value": "bf16", "source": "docs-mixed-precision", "confidence": "medium",
                            "note": "neuronx-cc's documented default (Trn2 and Trn3 alike); whether TorchNeuron "
                                    "overrides --auto-cast is unknown"},
        "default_class": {"class": "cpu_fallback", "source": "src-boxed-fallback",
                          "also": ["docs-best-practices", "docs-supported-operators"]},
        "ops": dict(sorted(ops.items())),
        "not_in_installed_torch": missing,
        "known_issues": rules.KNOWN_ISSUES,
        "decisions": rules.DECISIONS,
        "switches": rules.SWITCHES,
        "int64_ops": [],
        "host_sync": {"ops": ["aten::_local_scalar_dense", "aten::item"], "source": "docs-compile-ref",
                      "compiled": "graph break (Dynamo), not a rejection; fullgraph=True raises"},
        "compile": rules.COMPILE,
        "compile_rejects": rules.compile_rejects(name),
        "sdpa": rules.SDPA,
    }


def _legacy(docs: dict, legacy: list[str]) -> dict:
    views, others = _composites()
    ops, missing = {}, []
    for full in legacy:
        op = full.rstrip("_") if full.endswith("_") and not _exists(full) else full
        if not _exists(op):  # aten::_s_where left PyTorch long ago
            missing.append(full)
            continue
        ops[op] = {"class": "native", "dtypes": "xla", "source": "docs-legacy-ops"}
    for op in sorted(views):
        ops.setdefault(op, {"class": "native", "dtypes": "any", "source": "pytorch-dispatcher",
                            "note": "view op: metadata only"})
    for op in sorted(others):
        ops.setdefault(op, {"class": "composite", "dtypes": "any", "source": "pytorch-dispatcher"})
    hw = rules.HARDWARE["legacy-xla"]
    return {
        "name": "legacy-xla",
        "summary": hw["summary"],
        "historical": True,
        "confidence": "HISTORICAL. The 41 ops of the legacy torch-neuronx (PyTorch/XLA) 'Supported Operators' page, "
                      "unchanged since 2022. That page was never a strict allow-list: under PyTorch/XLA an op without "
                      "a lowering ran on the CPU and was copied back (pytorch-xla-fallback), so here every other op is "
                      "cpu_fallback and --strict measures 'on the page'. XLA-era rules: static shapes (a new shape "
                      "recompiles), data-dependent output shapes (nonzero, masked indexing) fall back to the CPU, "
                      ".item() forces a device->host sync.",
        "source_date": "2026-03-13",
        "generated_by": "python -m neuron_backend.hardware.profile_sources.build",
        "sources": docs,
        "hardware": {k: v for k, v in hw.items() if k != "summary"},
        "dtypes": rules.DTYPES,
        "input_autocast": {"map": {}, "source": "pytorch-xla-fallback",
                           "note": "no framework autocast modelled (XLA_USE_32BIT_LONG is opt-in)"},
        "rejected_dtypes": rules.rejected_dtypes("legacy-xla"),
        "complex_decompose_default": {"value": False, "source": "docs-env-vars",
                                      "note": "TORCH_NEURONX_COMPLEX_DECOMPOSE is a native-backend variable"},
        "matmul_autocast": {"value": "bf16", "source": "docs-mixed-precision", "confidence": "medium"},
        "default_class": {"class": "cpu_fallback", "source": "pytorch-xla-fallback"},
        "ops": dict(sorted(ops.items())),
        "not_in_installed_torch": missing,
        "known_issues": [],
        "decisions": [rules.LEGACY_DECISION],
        "switches": [],
        "op_table_from": "the legacy torch-neuronx (PyTorch/XLA) 'Supported Operators' page (2022)",
        "int64_ops": [],
        "host_sync": {"ops": ["aten::_local_scalar_dense", "aten::item"], "source": "pytorch-xla-fallback",
                      "compiled": "torch.compile is not supported by the XLA-era torch-neuronx (docs-legacy-no-compile)"},
        "compile": {"supported": False, "source": "docs-legacy-no-compile"},
    }


def build() -> dict[str, dict]:
    docs, src, legacy = _load()
    return {"trn2": _torchneuron("trn2", docs, src), "trn3": _torchneuron("trn3", docs, src),
            "legacy-xla": _legacy(docs, legacy)}


def main() -> int:
    for name, prof in build().items():
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(prof, indent=1, sort_keys=False) + "\n")
        counts: dict[str, int] = {}
        for e in prof["ops"].values():
            counts[e["class"]] = counts.get(e["class"], 0) + 1
        print(f"{path.name}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
