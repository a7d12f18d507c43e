"""The fine-tuning checks (lora, sft, fsdp, tp) through the harness's own runner, on tiny Llama, Mixtral and GPT-2
from the registry, on cpu and on the simulated neuron device; and a rank killed mid-check.

One run per (architecture, device) runs all four checks (one 2-rank group for fsdp and tp), shared by the tests
below: on cpu through the sweep's process pool (one worker), on neuron in this process.
"""

from __future__ import annotations

import functools
import os
import signal
import time

import psutil
import pytest
import torch

import neuron_backend
from compat.results import Check, Status
from worker.build.build import build_checkpoint
from worker.catalog.catalog import registry_entries
from worker.orchestration.sweep import run_sweep
from worker.run.checks.distributed import group_verdict
from worker.run.process.devices import resolve_device
from worker.run.ranks.group import run_group
from worker.run.reference import lora
from worker.run.reference.reference import prepare_reference
from worker.run.runner.runner import run_architecture

ARCHS = ("LlamaForCausalLM", "MixtralForCausalLM", "GPT2LMHeadModel")
FINETUNE = [Check.LORA, Check.SFT, Check.FSDP, Check.TP]


@pytest.fixture(autouse=True, scope="module")
def _device_settings():
    # CPU fallback on (the vendor's default, and the simulation's) in this process and in the ranks (they read the
    # environment at import). TORCH_NEURONX_SKIP_OP_PRECONDITIONS=1 (a real torch-neuronx variable) lets tiny
    # Mixtral's experts past trn2's _grouped_mm known issue, and switch integer_sort_topk=runs past the integer sort
    # of its routing (NCC_EVRF013 on real Trn2), so the checks' own machinery is what these tests exercise on a MoE
    # model; tests/backend/test_models.py covers both known issues themselves.
    names = ("NEURON_CPU_FALLBACK", "TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "NEURON_SWITCHES")
    before = {n: os.environ.get(n) for n in names}
    os.environ.update(dict.fromkeys(names[:2], "1"))
    os.environ["NEURON_SWITCHES"] = "integer_sort_topk=runs"
    cfg = neuron_backend.config.CONFIG
    saved = (cfg.cpu_fallback, cfg.skip_op_preconditions)
    neuron_backend.set_cpu_fallback(True)
    neuron_backend.set_switches({"integer_sort_topk": "runs"})
    cfg.skip_op_preconditions = True
    yield
    neuron_backend.set_cpu_fallback(saved[0])
    neuron_backend.set_switches({})
    cfg.skip_op_preconditions = saved[1]
    for n, v in before.items():
        if v is None:
            os.environ.pop(n, None)
        else:
            os.environ[n] = v


@functools.cache
def _cpu_sweep() -> dict[str, dict[Check, object]]:
    """The cpu runs go through the sweep's process pool (a daemonic worker starting the rank group), as in
    production; the neuron runs below run in this process."""
    entries = [e for e in registry_entries() if e.name in ARCHS]
    report = run_sweep(entries, resolve_device("cpu"), FINETUNE, jobs=1)
    out: dict[str, dict[Check, object]] = {}
    for r in report.results:
        out.setdefault(r.architecture, {})[r.check] = r
    return out


@functools.cache
def _records(arch: str, device: str) -> dict[Check, object]:
    if device == "cpu":
        return _cpu_sweep()[arch]
    entry = next(e for e in registry_entries() if e.name == arch)
    return {r.check: r for r in run_architecture(entry, resolve_device(device), FINETUNE)}


def _explain(rec) -> str:  # noqa: ANN001
    return f"{rec.status}: {rec.reason} {rec.blocking_op} {rec.error.message[:800] if rec.error else ''}\n{rec.log}"


@pytest.mark.parametrize("device", ["cpu", "neuron"])
@pytest.mark.parametrize("arch", ARCHS)
def test_lora_fsdp_pass(arch: str, device: str) -> None:
    recs = _records(arch, device)
    for check in (Check.LORA, Check.FSDP):
        assert recs[check].status == Status.PASS, _explain(recs[check])
    # the adapters really sat on attention projections, and the step changed them
    assert recs[Check.LORA].metrics["target_rule"] == "discovered" and recs[Check.LORA].metrics["targets"] >= 2
    assert recs[Check.FSDP].metrics["sharded_blocks"] >= 1  # decoder layers were sharded on their own


@pytest.mark.parametrize("device", ["cpu", "neuron"])
@pytest.mark.parametrize("arch", ARCHS)
def test_tp_passes_or_names_the_missing_plan(arch: str, device: str) -> None:
    rec = _records(arch, device)[Check.TP]
    if arch == "GPT2LMHeadModel":  # GPT-2 defines no base_model_tp_plan (transformers 5.23)
        assert rec.status == Status.SKIPPED and rec.reason.startswith("no tp_plan"), _explain(rec)
    else:
        assert rec.status == Status.PASS, _explain(rec)
        assert rec.metrics["param_type"] == "DTensor"  # the model really was sharded


@pytest.mark.parametrize("arch", ARCHS)
def test_sft_on_cpu_matches_the_reference_curve(arch: str) -> None:
    rec = _records(arch, "cpu")[Check.SFT]
    assert rec.status == Status.PASS, _explain(rec)
    assert len(rec.metrics["losses"]) == 2 and rec.metrics["losses"][1] < rec.metrics["losses"][0]


@pytest.mark.parametrize("arch", ARCHS)
def test_sft_on_neuron_matches_the_cpu_curve(arch: str) -> None:
    # trl 1.16 asks torch.neuron.get_device_properties(0) and Trainer pins batches for the accelerator: both are
    # part of the device now, so the standard SFT step runs on neuron.
    rec = _records(arch, "neuron")[Check.SFT]
    assert rec.status == Status.PASS, _explain(rec)
    assert len(rec.metrics["losses"]) == 2


def test_a_plan_that_fails_on_the_cpu_group_too_is_blamed_on_the_reference() -> None:
    # Transformers 5.23's tp_plan for LFM2 breaks DTensor's unpadding on 2 ranks on the CPU as on the device
    # ("narrow unexpectedly changed concrete size"): not the device's failure, so reference_fail with the CPU
    # group's error, and the device's own error kept in the record.
    entry = next(e for e in registry_entries() if e.name == "Lfm2ForCausalLM")
    (rec,) = run_architecture(entry, resolve_device("neuron"), [Check.TP])
    assert rec.status == Status.REFERENCE_FAIL, _explain(rec)
    assert rec.reason.startswith("the same 2-rank tp group fails on the CPU too"), rec.reason
    assert rec.error is not None and "narrow" in rec.error.message


def test_a_trl_failure_on_the_cpu_names_trl() -> None:
    # TRL 1.16's fused LM head reads config.num_experts, which GraniteMoe's config spells num_local_experts: the
    # standard SFT script fails on the CPU as well, so the record says reference_fail and where in TRL it broke.
    entry = next(e for e in registry_entries() if e.name == "GraniteMoeForCausalLM")
    (rec,) = run_architecture(entry, resolve_device("cpu"), [Check.SFT])
    assert rec.status == Status.REFERENCE_FAIL, _explain(rec)
    assert "at trl/trainer/utils.py:" in rec.reason and "num_experts" in rec.reason, rec.reason


def test_sft_reference_pads_as_trl_pads_for_the_device() -> None:
    # TRL pads batches to a multiple of 128 on Neuron only, and CpmAnt's loss depends on padding (it does not mask
    # pads out): an unpadded CPU reference blamed the device for TRL's choice (loss 25.79 vs 24.55, "mismatch").
    entry = next(e for e in registry_entries() if e.name == "CpmAntForCausalLM")
    (rec,) = run_architecture(entry, resolve_device("neuron"), [Check.SFT])
    assert rec.status == Status.PASS, _explain(rec)
    assert rec.metrics["pad_to_multiple_of"] == 128


def test_lora_discovers_attention_projections_only() -> None:
    # gate_proj under an attention block is still an MLP-style name that Transformers may fuse: never a target
    model = torch.nn.Module()
    model.config = type("C", (), {"model_type": "x"})()
    model.attn = torch.nn.Module()
    model.attn.q_proj = torch.nn.Linear(4, 4)
    model.attn.gate_proj = torch.nn.Linear(4, 4)
    model.mlp = torch.nn.Module()
    model.mlp.fc = torch.nn.Linear(4, 4)
    targets = lora.discover_targets(model)
    assert targets == lora.Targets(["attn.q_proj"], "discovered")


def test_a_killed_rank_fails_the_check_cleanly(tmp_path) -> None:
    entry = next(e for e in registry_entries() if e.name == "LlamaForCausalLM")
    built = build_checkpoint(entry, tmp_path / "llama", seed=0)
    ref = prepare_reference(built.path, "fp32", 0)
    seen: dict[str, list[int]] = {"killed": []}

    def kill_rank1_in_fsdp(procs, scratch) -> None:  # noqa: ANN001
        log = scratch / "rank1.log"
        if not seen["killed"] and log.exists() and "[rank 1] fsdp" in log.read_text(errors="replace"):
            os.killpg(procs[1].pid, signal.SIGKILL)
            seen["killed"].append(procs[1].pid)

    run = run_group(entry.name, built.path, "cpu", ["fsdp"], ref.inputs, seed=0, deadline_s=240,
                    group_timeout_s=60, while_running=kill_rank1_in_fsdp)
    assert seen["killed"], run.describe()
    fields = group_verdict(run, Check.FSDP, ref)
    assert fields["status"] == Status.CRASH, (fields, run.describe())
    assert fields["reason"] == "rank 1 died by SIGKILL during fsdp"
    assert run.returncodes[1] == -signal.SIGKILL and not run.timed_out
    for pid in run.pids:  # no rank left, not even as a zombie of ours (a SIGKILLed one may take a moment to die)
        assert _dies(pid), pid
    # Nothing but the forkserver the ranks start from (one per process, by design) is left among our children.
    left = [p for p in psutil.Process().children(recursive=True) if not _dies(p.pid, within_s=0)]
    assert not [p for p in left if _is_rank(p, run.pids)], left


def _dies(pid: int, within_s: float = 30) -> bool:
    """Whether ``pid`` is gone or a zombie within ``within_s`` (polled: a fixed wait raced a busy machine)."""
    end = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def _is_rank(proc: psutil.Process, pids: list[int]) -> bool:
    """One of the group's ranks, or any process named as a busy rank (not the forkserver, by design one per process);
    a process that ended meanwhile is none."""
    try:
        if "multiprocessing.forkserver" in " ".join(proc.cmdline()):
            return False
        return proc.pid in pids or "compat-rank" in proc.name()
    except psutil.NoSuchProcess:
        return False
