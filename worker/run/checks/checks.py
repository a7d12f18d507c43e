"""The checks (load, forward, generate, train, compile; lora, sft, fsdp, tp) run on the device and judged against the
CPU reference.

Each check function does the device work and returns a judge.Verdict; ``run_check`` is the edge that times it,
audits CPU fallback, and turns any exception into an attributed ResultRecord.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from compat.checks import DISTRIBUTED_CHECKS, RUN_ORDER, USES_LOADED_MODEL, Check
from compat.results import ResultRecord, Status
from worker.judge import judge
from worker.judge.attribution import (
    attribute,
    error_info,
    missing_package,
    missing_package_reason,
    reference_blame,
)
from worker.run.process.by_name import resolve
from worker.run.reference.context import CheckContext
from worker.run.reference.optrace import OpRecorder
from worker.run.reference.reference import (
    ReferenceFailure,
    forward_logits,
    greedy,
    load_model,
    train_step,
)

__all__ = ["RUN_ORDER", "CheckContext", "CHECKS", "run_check"]


def check_load(ctx: CheckContext) -> judge.Verdict:
    """from_pretrained(..., device_map=DEVICE); every tensor must land on the device with the exact stored bytes."""
    ctx.model = load_model(ctx.ref.path, ctx.device.torch_device)
    want = torch.device(ctx.device.torch_device).type
    ref_state = ctx.ref.model.state_dict()
    off_device, differ = [], []
    for name, t in ctx.model.state_dict().items():
        if t.device.type != want:
            off_device.append(name)
            continue
        r = ref_state.get(name)
        # A load is a copy: any difference at all is a bug (tolerance 0).
        if r is not None and not torch.equal(t.detach().cpu(), r):
            differ.append(name)
    metrics = {"tensors": len(ref_state), "off_device": len(off_device), "differ": len(differ)}
    if off_device:
        return judge.Verdict(Status.MISMATCH, metrics, f"load: {len(off_device)} tensors not on {want}, "
                                                        f"e.g. {off_device[0]}")
    if differ:
        return judge.Verdict(Status.MISMATCH, metrics, f"load: {len(differ)} tensors differ from the checkpoint, "
                                                        f"e.g. {differ[0]}")
    return judge.Verdict(Status.PASS, metrics)


def check_forward(ctx: CheckContext) -> judge.Verdict:
    logits = forward_logits(ctx.model, ctx.ref.inputs, ctx.device.torch_device)
    ctx.device.synchronize()
    verdict = judge.judge_numerics(logits, ctx.ref.policy_logits, ctx.ref.precise_logits, ctx.ref.policy)
    verdict.fields.update(judge.fp32_error(logits, ctx.ref.logits))
    return verdict


def check_generate(ctx: CheckContext) -> judge.Verdict:
    ref_tokens, margins = ctx.ref.generation()
    tokens, _ = greedy(ctx.model, ctx.ref.inputs["prompt"], ctx.device.torch_device)
    # Each of the two competing logits may be off by the forward bound, so a tie is a margin within twice it.
    return judge.judge_generation(tokens, ref_tokens, margins, 2.0 * ctx.ref.logit_bound())


def check_train(ctx: CheckContext) -> judge.Verdict:
    refs = ctx.ref.training()
    got = train_step(ctx.model, ctx.ref.inputs, ctx.device.torch_device)
    pol, precise = refs["policy"], refs["precise"]
    assert pol is not None
    verdicts = {
        part: judge.judge_numerics(got[part], pol[part], precise[part] if precise else None, ctx.ref.policy,
                                   what=part)
        for part in ("loss", "grads", "params")
    }
    return judge.judge_all(verdicts)


def check_compile(ctx: CheckContext) -> judge.Verdict:
    torch._dynamo.reset()
    try:
        compiled = torch.compile(ctx.model, backend=ctx.device.compile_backend, dynamic=False)
        logits = forward_logits(compiled, ctx.ref.inputs, ctx.device.torch_device)
    finally:
        torch._dynamo.reset()
    verdict = judge.judge_numerics(logits, ctx.ref.policy_logits, ctx.ref.precise_logits, ctx.ref.policy)
    verdict.metrics["backend"] = ctx.device.compile_backend
    verdict.fields.update(judge.fp32_error(logits, ctx.ref.logits))
    return verdict


# The fine-tuning checks (lora, sft; fsdp, tp in a rank group: distributed_record), by name: their module imports
# PEFT, TRL, datasets and FSDP (~1.4 s of a pool worker's ~3 s warm-up), which the default checks never use.
FINETUNE_CHECKS = "worker.run.checks.finetune_checks"


def _finetune(name: str) -> Callable[[CheckContext], judge.Verdict]:
    def run(ctx: CheckContext) -> judge.Verdict:
        return resolve(f"{FINETUNE_CHECKS}:{name}")(ctx)
    return run


# The in-process checks' work; the distributed ones run in a rank group (distributed_record). Order, kind and the
# rest of each check's facts: compat/checks.py.
CHECKS: dict[Check, Callable[[CheckContext], judge.Verdict]] = {
    Check.LOAD: check_load, Check.FORWARD: check_forward, Check.GENERATE: check_generate,
    Check.TRAIN: check_train, Check.COMPILE: check_compile, Check.LORA: _finetune("check_lora"),
    Check.SFT: _finetune("check_sft"),
}
if set(CHECKS) != set(Check) - set(DISTRIBUTED_CHECKS):
    raise AssertionError("every check that is not distributed has its work in CHECKS (compat/checks.py's table)")


def _find_failing_op(ctx: CheckContext, check: Check) -> str | None:
    """Re-run a failed check under the op catcher to name the aten op that raised (failures only: it is slow)."""
    if check == Check.COMPILE:
        return None  # a dispatch mode would change what Dynamo traces
    if check in USES_LOADED_MODEL and ctx.model is None:
        return None
    catcher = OpRecorder(record=False)
    try:
        with catcher:
            CHECKS[check](ctx)
    except Exception:  # noqa: BLE001 - the failure is expected; we only want the op
        pass
    return catcher.failing_op


def run_check(ctx: CheckContext, check: Check) -> ResultRecord:
    """Run one check on the device and return its record; never raises."""
    dev = ctx.device
    base = {"architecture": ctx.architecture, "rank": ctx.rank, "device": dev.name, "check": check}
    if check in USES_LOADED_MODEL and ctx.model is None:
        return ResultRecord(**base, status=Status.SKIPPED, reason="load failed")
    if check in DISTRIBUTED_CHECKS:
        return resolve(f"{FINETUNE_CHECKS}:distributed_record")(ctx, check)
    dev.reset_fallback()
    dev.reset_peak_memory()
    t0 = time.perf_counter()
    try:
        verdict = CHECKS[check](ctx)
    except ReferenceFailure as exc:
        status, reason = reference_blame(exc)
        return ResultRecord(**base, status=status, reason=reason, duration_s=time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a record
        duration = time.perf_counter() - t0
        fallback = dev.fallback_ops()
        if (package := missing_package(exc)) is not None:  # the environment's, not the device's
            return ResultRecord(**base, status=Status.HARNESS_ERROR, reason=missing_package_reason(package, str(exc)),
                                error=error_info(exc), fallback_ops=fallback, duration_s=duration)
        att = attribute(exc)
        if not att.op_from_device:
            # The exception names no aten op of its own: re-run under the catcher to find the one that raised.
            failing = _find_failing_op(ctx, check)
            if failing:
                att = attribute(exc, failing)
        return ResultRecord(**base, status=att.status, blocking_op=att.blocking_op, error=att.error,
                            metrics={"error_digest": att.digest}, fallback_ops=fallback, duration_s=duration,
                            peak_mem_mb=dev.peak_memory_mb())
    duration = time.perf_counter() - t0
    return ResultRecord(**base, status=verdict.status, metrics=verdict.metrics, reason=verdict.reason,
                        fallback_ops=dev.fallback_ops(), duration_s=duration, peak_mem_mb=dev.peak_memory_mb(),
                        **verdict.fields)
