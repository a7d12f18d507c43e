"""The fine-tuning checks on the device, each judged against the same computation on the CPU reference: ``lora``
and ``sft`` in the architecture's process (their CPU side, cached: worker/run/reference/finetune_reference.py), ``fsdp``
and ``tp`` through one 2-rank group (worker/run/checks/distributed.py).

Tolerances are the train check's (worker/judge/judge.py: torch._dynamo.utils.same's RMSE rule against the fp64
run, or the reference itself where fp64 cannot run); frozen weights are compared exactly (tolerance 0).
"""

from __future__ import annotations

import time

import torch

from compat.results import DISTRIBUTED_CHECKS, Check, ResultRecord, Status
from worker.judge import judge
from worker.run.checks.distributed import group_verdict, no_tp_plan_reason, run_distributed
from worker.run.reference import lora as lora_mod
from worker.run.reference.context import CheckContext
from worker.run.reference.finetune_reference import lora_reference, sft_reference
from worker.run.reference.reference import ReferenceFailure, load_model
from worker.run.reference.sft import sft_losses

# --- lora -------------------------------------------------------------------------------------------------------


def check_lora(ctx: CheckContext) -> judge.Verdict:
    """peft LoRA on the device: the same adapters (initial weights copied from the reference), one AdamW step;
    loss, adapter gradients and adapter weights after the step against the CPU; frozen base weights unchanged."""
    refs = lora_reference(ctx)
    dev = ctx.device.torch_device
    model = lora_mod.add_adapters(load_model(ctx.ref.path, dev), refs["targets"], ctx.ref.seed)
    lora_mod.load_adapter_state(model, refs["init"])
    frozen = {n: t.to("cpu").clone() for n, t in lora_mod.frozen_state(model).items()}
    got = lora_mod.lora_step(model, ctx.ref.inputs, dev)
    ctx.device.synchronize()
    pol, precise = refs["policy"], refs["precise"]
    verdicts = {part: judge.judge_numerics(got[part], pol[part], precise[part] if precise else None,
                                           ctx.ref.policy, what=f"adapter {part}" if part != "loss" else part)
                for part in ("loss", "grads", "params")}
    after = lora_mod.frozen_state(model)
    changed = [n for n, before in frozen.items() if not torch.equal(after[n].to("cpu"), before)]
    if changed:  # nothing may write a frozen weight: tolerance 0
        verdicts["frozen"] = judge.Verdict(Status.MISMATCH, {"changed": len(changed)},
                                           f"lora: {len(changed)} frozen base weights changed, e.g. {changed[0]}")
    verdict = judge.judge_all(verdicts)
    verdict.metrics.update(targets=len(refs["targets"].names), target_rule=refs["targets"].rule,
                           adapter_params=int(got["params"].numel()), frozen_tensors=len(frozen))
    return verdict


# --- sft --------------------------------------------------------------------------------------------------------


def check_sft(ctx: CheckContext) -> judge.Verdict:
    """trl SFTTrainer, 2 steps with ``use_cpu=False`` on the device; its loss curve against the CPU run's.

    Trainer and Accelerate pick the device themselves, as on real Trainium (the simulation's ``torch_neuronx``
    module); Trainer's own defaults (fused AdamW, pinned DataLoader memory, TRL's Neuron padding) stay, so what a standard SFT script hits on the device is what fails."""
    refs = sft_reference(ctx)
    # On the cpu device the device's own setting is use_cpu=True (Trainer's way to pick the CPU); with
    # use_cpu=False Trainer would take any registered accelerator instead.
    on_cpu = torch.device(ctx.device.torch_device).type == "cpu"
    got = sft_losses(ctx.ref.path, ctx.ref.inputs, ctx.device.torch_device, seed=ctx.ref.seed, reference=on_cpu)
    verdict = judge.judge_numerics(got, refs["policy"], refs["precise"], ctx.ref.policy, what="loss curve")
    verdict.metrics["losses"] = [float(x) for x in got]
    verdict.metrics["ref_losses"] = [float(x) for x in refs["policy"]]
    verdict.metrics["pad_to_multiple_of"] = refs["pad_to_multiple_of"]
    return verdict


# --- fsdp / tp --------------------------------------------------------------------------------------------------


# A device group's error or mismatch may be the parallel plan's own (Transformers' tp_plan, FSDP2 on this model),
# not the device's: the same group on the CPU decides. An op or dtype the device refused, a crash or a timeout is
# the device's by itself and costs no CPU group.
GROUP_BLAME_STATUSES = (Status.ERROR, Status.MISMATCH)


def cpu_group_blame(ctx: CheckContext, check: Check) -> None:
    """Raise ReferenceFailure when ``check``'s 2-rank group fails on the CPU too (run once per architecture and
    check, cached): the single-process CPU reference passing does not show that 2 ranks can run it at all."""
    key = f"group-cpu-{check}"
    if key not in ctx.ref._cache:
        # Not on a warm pair: this group runs only after a device failure, and an idle CPU pair kept beside the
        # device's would count against every later task's memory limit (pool.py counts a worker's descendants).
        run = run_distributed(ctx.architecture, ctx.ref, "cpu", [check], ctx.ref.seed, warm=False)
        ctx.ref._cache[key] = group_verdict(run, check, ctx.ref)
    cpu = ctx.ref._cache[key]
    if cpu["status"] != Status.PASS:
        err = cpu.get("error")
        detail = f"{err.type}: {err.message}" if err is not None else cpu.get("reason") or ""
        raise ReferenceFailure(f"the same 2-rank {check} group fails on the CPU too ({cpu['status']}): {detail}")


def distributed_record(ctx: CheckContext, check: Check) -> ResultRecord:
    """The record of fsdp or tp. The first of them launches one group for every distributed check still to run
    (a group stopped early by a failure is launched again for the checks it never reached)."""
    base = {"architecture": ctx.architecture, "rank": ctx.rank, "device": ctx.device.name, "check": check}
    t0 = time.perf_counter()
    if check == Check.TP and (why := no_tp_plan_reason(ctx.ref.model)):
        return ResultRecord(**base, status=Status.SKIPPED, reason=why)
    run = ctx.cache.get("group")
    launched = run is None or not any(str(check) in r for r in run.results)
    if launched:
        todo = [c for c in ctx.checks if c in DISTRIBUTED_CHECKS and ctx.checks.index(c) >= ctx.checks.index(check)
                and not (c == Check.TP and no_tp_plan_reason(ctx.ref.model))]
        try:
            run = run_distributed(ctx.architecture, ctx.ref, ctx.device.name, todo or [check], ctx.ref.seed)
        except Exception as exc:  # noqa: BLE001 - the launcher's own failure is the harness's
            return ResultRecord(**base, status=Status.HARNESS_ERROR,
                                reason=f"rank group launch failed: {type(exc).__name__}: {exc}"[:500],
                                duration_s=time.perf_counter() - t0)
        ctx.cache["group"] = run
    try:
        fields = group_verdict(run, check, ctx.ref)
    except ReferenceFailure as exc:
        return ResultRecord(**base, status=Status.REFERENCE_FAIL, reason=str(exc)[:500])
    if fields["status"] in GROUP_BLAME_STATUSES and torch.device(ctx.device.torch_device).type != "cpu":
        try:
            cpu_group_blame(ctx, check)
        except ReferenceFailure as exc:  # the device's error stays in the record, blamed on the reference
            return ResultRecord(**base, status=Status.REFERENCE_FAIL, reason=str(exc)[:500],
                                error=fields.get("error"), metrics=fields["metrics"],
                                fallback_ops=fields["fallback_ops"], duration_s=time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - the CPU group's launch failing is the harness's
            return ResultRecord(**base, status=Status.HARNESS_ERROR,
                                reason=f"CPU rank group launch failed: {type(exc).__name__}: {exc}"[:500],
                                duration_s=time.perf_counter() - t0)
    # The check's cost: its own time on the slower rank; the check that launched the group also carries the
    # group's start-up (processes, imports, rendezvous) and teardown.
    own = max(fields["metrics"].get("rank_seconds") or [0.0])
    if launched:
        others = sum(max((r[c]["duration_s"] for r in run.results if c in r), default=0.0)
                     for c in {c for r in run.results for c in r} - {str(check)})
        own = max(own, run.duration_s - others)
    fields["metrics"]["group_wall_s"] = run.duration_s
    return ResultRecord(**base, duration_s=own, **fields)
