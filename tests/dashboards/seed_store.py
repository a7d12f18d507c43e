"""A small but realistic sweep (two nightly neuron runs, one cpu run) written through ``service.store.Store``.

Shaped like a real sweep: catalog in Hub-rank order, four checks, blocked ops, a regression and a fix between runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from compat.decisions import DecisionEffect, effect_of
from compat.results import (
    DEFAULT_CHECKS,
    ArchitectureEntry,
    Check,
    DeviceInfo,
    ErrorInfo,
    OpTrace,
    ResultRecord,
    RunInfo,
    Status,
    Trigger,
)

# (name, model_type, representative)
CATALOG: list[tuple[str, str, str]] = [
    ("LlamaForCausalLM", "llama", "meta-llama/Llama-3.1-8B"),
    ("Qwen2ForCausalLM", "qwen2", "Qwen/Qwen2.5-7B-Instruct"),
    ("MistralForCausalLM", "mistral", "mistralai/Mistral-7B-v0.1"),
    ("GPT2LMHeadModel", "gpt2", "openai-community/gpt2"),
    ("Gemma2ForCausalLM", "gemma2", "google/gemma-2-2b"),
    ("Phi3ForCausalLM", "phi3", "microsoft/Phi-3-mini-4k-instruct"),
    ("MixtralForCausalLM", "mixtral", "mistralai/Mixtral-8x7B-v0.1"),
    ("FalconForCausalLM", "falcon", "tiiuae/falcon-7b"),
    ("GPTNeoXForCausalLM", "gpt_neox", "EleutherAI/pythia-160m"),
    ("OPTForCausalLM", "opt", "facebook/opt-125m"),
    ("BloomForCausalLM", "bloom", "bigscience/bloom-560m"),
    ("MambaForCausalLM", "mamba", "state-spaces/mamba-130m-hf"),
    ("Qwen2MoeForCausalLM", "qwen2_moe", "Qwen/Qwen1.5-MoE-A2.7B"),
    ("DeepseekV2ForCausalLM", "deepseek_v2", "deepseek-ai/DeepSeek-V2-Lite"),
]
HISTC = "aten::histc (Long)"
CUMSUM = "aten::_cumsum (BFloat16)"
# The error a MoE router's histc raises, several lines long as real ones are (shown once per architecture).
HISTC_ERROR = ("NotImplementedError: 'aten::histc' is not implemented for 'Long' on neuron.\n"
               "The operator is not in the device's op table for this dtype (profile trn2).\n"
               "Inputs: (Long[64]) bins=8 min=0 max=7.\n"
               "Set NEURON_CPU_FALLBACK=1 to run it on the CPU instead.\n"
               "Reproduce: compat repro MixtralForCausalLM --device neuron\n"
               "See the architecture's captured log for the full trace.")
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Outcome:
    """One failing (architecture, check) on neuron; every check not listed passes."""

    status: Status
    blocking_op: str | None = None
    error: str | None = None
    reason: str | None = None


def _remote_code_skips() -> dict[tuple[str, Check], Outcome]:
    """Remote-code architectures are listed, never executed, on every device."""
    return {("DeepseekV2ForCausalLM", c): Outcome(Status.SKIPPED, reason="needs trust_remote_code")
            for c in DEFAULT_CHECKS}


def _neuron_outcomes(night: int) -> dict[tuple[str, Check], Outcome]:
    """Failures of nightly run ``night`` (0 = previous, 1 = latest): Falcon is fixed, Phi3 regresses."""
    out: dict[tuple[str, Check], Outcome] = _remote_code_skips()
    for check in (Check.FORWARD, Check.GENERATE, Check.TRAIN):
        for arch in ("MixtralForCausalLM", "Qwen2MoeForCausalLM"):
            out[(arch, check)] = Outcome(Status.UNSUPPORTED_OP, HISTC, HISTC_ERROR)
    out[("MambaForCausalLM", Check.FORWARD)] = Outcome(Status.UNSUPPORTED_DTYPE, CUMSUM,
                                                       "RuntimeError: _cumsum not implemented for BFloat16")
    out[("MambaForCausalLM", Check.GENERATE)] = Outcome(Status.SKIPPED, reason="forward failed")
    out[("BloomForCausalLM", Check.FORWARD)] = Outcome(Status.MISMATCH, error="max abs diff 3.1e-2 > atol 1e-3")
    out[("BloomForCausalLM", Check.GENERATE)] = Outcome(Status.MISMATCH, error="generated tokens differ at step 4")
    if night == 0:
        out[("FalconForCausalLM", Check.GENERATE)] = Outcome(Status.TIMEOUT, error="generate exceeded 300 s")
    else:
        out[("Phi3ForCausalLM", Check.FORWARD)] = Outcome(Status.MISMATCH, error="max abs diff 2.0e-2 > atol 1e-3")
        out[("GPT2LMHeadModel", Check.TRAIN)] = Outcome(Status.OOM, error="neuron: out of memory (HBM 16 GiB)")
    return out


def _record(arch: str, rank: int, device: str, check: Check, outcome: Outcome | None, run_id: str) -> ResultRecord:
    status = outcome.status if outcome else Status.PASS
    err = None
    if outcome and outcome.error:
        typ, _, msg = outcome.error.partition(": ")
        err = ErrorInfo(type=typ if msg else "AssertionError", message=msg or outcome.error)
    return ResultRecord(
        architecture=arch, rank=rank, device=device, check=check, status=status,
        metrics={"max_abs_diff": 0.0 if status == Status.PASS else 0.031, "tokens_per_s": 41.5 + rank},
        blocking_op=outcome.blocking_op if outcome else None, error=err,
        reason=outcome.reason if outcome else None, duration_s=0.4 + rank / 10,
        # Greedy generate's argmax runs on the CPU fallback on neuron (as on the real trn2 profile): supported
        # with CPU fallback, not natively.
        fallback_ops=["aten::argmax (Long)"] if (arch, device, check, status) == (
            "LlamaForCausalLM", "neuron", Check.GENERATE, Status.PASS) else [],
        peak_mem_mb=120.0 + rank, repro=f"compat repro {arch} --device {device} --check {check}",
        log=f"[{run_id[:8]}] {arch} {check} on {device}: {status}\n",
    )


def seed_sweep(store, now: datetime | None = None) -> dict[str, str]:  # noqa: ANN001 - service.store.Store
    """Write the three runs; returns their ids by name (neuron_prev, neuron_latest, cpu_latest)."""
    now = now or datetime.now(UTC)
    catalog = [ArchitectureEntry(name=n, model_type=t, rank=i + 1, downloads=10_000_000 // (i + 1), representative=r,
                                 remote_code=n.startswith("Deepseek")) for i, (n, t, r) in enumerate(CATALOG)]
    neuron = DeviceInfo(name="neuron", simulated=True, description="bundled simulation, profile trn2")
    cpu = DeviceInfo(name="cpu", description="x86_64 CPU reference")
    plans = [
        ("neuron_prev", neuron, now - timedelta(days=1), _neuron_outcomes(0)),
        ("neuron_latest", neuron, now - timedelta(hours=1), _neuron_outcomes(1)),
        ("cpu_latest", cpu, now - timedelta(hours=2), _remote_code_skips()),
    ]
    ids: dict[str, str] = {}
    for key, dev, started, outcomes in plans:
        run = RunInfo(trigger=Trigger.NIGHTLY, device=dev, started=started, versions={"torch": "2.13.0"},
                      catalog_source="snapshot", snapshot_id="2026-05-01T00:00:00+00:00/1000")  # a Hub ranking
        planned = [(a.name, dev.name, str(c)) for a in catalog for c in DEFAULT_CHECKS]
        store.start_run(run, catalog, planned)
        records = [_record(a.name, a.rank, dev.name, c, outcomes.get((a.name, c)), run.id)
                   for a in catalog for c in DEFAULT_CHECKS]
        store.add_results(run.id, records)
        store.add_op_traces(run.id, [OpTrace(architecture=a.name, ops=["aten::mm (Float)", HISTC]
                                             if "Mixtral" in a.name or "Moe" in a.name else ["aten::mm (Float)"])
                                     for a in catalog])
        if key == "neuron_latest":
            store.set_decisions(run.id, _decisions())
        store.finish_run(run.id)
        ids[key] = run.id
    return ids


def _decisions() -> list[DecisionEffect]:
    """The latest neuron run's measured decisions, with the real trn2 profile's switch subjects and sources (their
    free-text refs, one with a note after its URL, as the overview must render them)."""
    profile = json.loads((REPO / "neuron_backend" / "hardware" / "profiles" / "trn2.json").read_text())
    refs = {k: v["ref"] for k, v in profile["sources"].items()}
    by_id = {sw["id"]: sw for sw in profile["switches"]}
    moe = {"MixtralForCausalLM": "failing", "Qwen2MoeForCausalLM": "failing"}
    plans = [  # (switch, option, measured_by, verdicts under the option)
        ("integer_sort_topk", "runs", "rerun", {"MixtralForCausalLM": "failing", "Qwen2MoeForCausalLM": "failing"}),
        ("grouped_mm_preconditions", "not_enforced", "rerun", moe),
        ("complex_eager", "raises", "rerun", {"Phi3ForCausalLM": "failing"}),
        ("argmax_device", "native", "traces", {"LlamaForCausalLM": "supported"}),
    ]
    base = {**moe, "Phi3ForCausalLM": "failing", "LlamaForCausalLM": "supported_with_fallback"}
    out = [effect_of({sid: option}, by_id[sid]["subject"], by_id[sid]["confidence"],
                     [refs[k] for k in by_id[sid]["options"][option]["sources"]], how, base, under, sorted(under))
           for sid, option, how, under in plans]
    out.append(effect_of({"integer_sort_topk": "runs", "grouped_mm_preconditions": "not_enforced"},
                         " + ".join(by_id[s]["subject"] for s in ("integer_sort_topk", "grouped_mm_preconditions")),
                         "low", [], "rerun", base, {a: "supported_with_fallback" for a in moe}, sorted(moe)))
    return out
