"""The fsdp and tp checks: one 2-rank group per architecture (worker/run/ranks/group.py), its outcome judged per check.

Pure where it can be: ``group_verdicts`` turns what the ranks left into records against the CPU reference; the
launch itself is ``run_distributed``. A stopped group is ``crash`` (a rank died by a signal) or ``timeout`` for the
check it was running, with every rank's log; a failure inside a rank carries that rank's attribution.
"""

from __future__ import annotations

import signal
from typing import Any

import torch

from compat.results import DISTRIBUTED_CHECKS, Check, ErrorInfo, Status
from compat.settings import get_settings
from worker.judge import judge
from worker.run.ranks.group import GroupRun, run_group

# c10d's per-collective timeout in the ranks: a peer that never arrives fails the survivor within this (the
# launcher stops the group sooner, PEER_GRACE_S after a rank exits).
GROUP_TIMEOUT_S = 60.0


def no_tp_plan_reason(model: torch.nn.Module) -> str | None:
    """Why ``tp`` cannot run: the model has no tensor-parallel plan (transformers/modeling_utils.py
    ``supports_tp_plan``: the class's ``_tp_plan``, its base model's, or ``config.base_model_tp_plan``)."""
    if getattr(model, "supports_tp_plan", False):
        return None
    return f"no tp_plan: {type(model).__name__} defines no tensor-parallel plan (base_model_tp_plan is empty)"


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _stopped(run: GroupRun, check: str) -> tuple[Status, str] | None:
    """Why the group never produced ``check`` on every rank: timeout, a rank killed by a signal, a rank's exit."""
    if all(check in r for r in run.results):
        return None
    if run.timed_out:
        return Status.TIMEOUT, f"rank group passed its {run.duration_s:.0f} s deadline during {check}"
    for rank, code in enumerate(run.returncodes):
        if code is not None and code < 0 and rank not in run.killed:
            return Status.CRASH, f"rank {rank} died by {_signal_name(code)} during {check}"
    for rank, code in enumerate(run.returncodes):
        if code not in (0, None) and check not in run.results[rank]:
            return Status.CRASH, f"rank {rank} exited with code {code} during {check}"
    return None


def _first_failure(run: GroupRun, check: str) -> dict[str, Any] | None:
    """The failing rank's result that started it: an op/dtype error over a collective error (its peer's symptom),
    then the lowest rank."""
    fails = [r[check] for r in run.results if check in r and r[check]["status"] != "ok"]
    fails.sort(key=lambda f: (f["status"] == str(Status.ERROR) and f.get("collective") is not None))
    return fails[0] if fails else None


def judge_fsdp(values: list[dict[str, Any]], training: dict[str, Any], policy: str) -> judge.Verdict:
    """Loss (the ranks' mean: each rank holds one of two samples with the same number of label tokens, so the
    mean of the two per-sample mean losses is the whole-batch mean loss), gathered gradients and gathered
    parameters after the step, against one CPU process's step on the whole batch; judged as the train check is
    (torch._dynamo.utils.same's RMSE rule, worker/judge/judge.py)."""
    pol, precise = training["policy"], training["precise"]
    got = {"loss": torch.stack([v["loss"] for v in values]).mean(0), "grads": values[0]["grads"],
           "params": values[0]["params"]}
    verdicts = {part: judge.judge_numerics(got[part], pol[part], precise[part] if precise else None, policy,
                                           what=part) for part in ("loss", "grads", "params")}
    # The gathered parameters are the same tensor on every rank (tolerance 0: it is one all-gather's result).
    if not torch.equal(values[0]["params"], values[1]["params"]):
        verdicts["ranks"] = judge.Verdict(Status.MISMATCH, {}, "fsdp: the ranks gathered different parameters")
    verdict = judge.judge_all(verdicts)
    verdict.metrics["sharded_blocks"] = values[0].get("sharded_blocks")
    return verdict


def judge_tp(values: list[dict[str, Any]], ref_logits: torch.Tensor, precise: torch.Tensor | None,
             policy: str) -> judge.Verdict:
    """Every rank's gathered logits against the CPU forward, as the forward check judges them."""
    verdicts = {f"rank{r}": judge.judge_numerics(v["logits"], ref_logits, precise, policy)
                for r, v in enumerate(values)}
    verdict = judge.judge_all(verdicts)
    verdict.metrics["param_type"] = values[0].get("param_type")
    return verdict


def group_verdict(run: GroupRun, check: Check, ref: Any) -> dict[str, Any]:
    """Record fields for ``check`` from what the group left: status, reason, blocking op, error, metrics."""
    name = str(check)
    rank_meta = {"rank_exit_codes": run.returncodes, "rank_seconds": [
        r[name]["duration_s"] for r in run.results if name in r]}
    fallback = sorted({op for r in run.results if name in r for op in r[name].get("fallback_ops", [])})
    fail = _first_failure(run, name)
    stopped = _stopped(run, name)
    if stopped is not None and stopped[0] == Status.CRASH and "died by" in stopped[1]:
        # A rank killed from outside (OOM killer, a signal, a segfault) is the cause; its peer's error (a broken
        # connection in the collective it was waiting in) is the symptom, kept as the record's error.
        return {"status": Status.CRASH, "reason": stopped[1], "metrics": rank_meta, "fallback_ops": fallback,
                "blocking_op": fail.get("blocking_op") if fail else None,
                "error": ErrorInfo(**fail["error"]) if fail else None}
    if fail is not None:
        return {"status": Status(fail["status"]), "blocking_op": fail.get("blocking_op"),
                "error": ErrorInfo(**fail["error"]), "metrics": rank_meta, "fallback_ops": fallback}
    if stopped is not None:
        return {"status": stopped[0], "reason": stopped[1], "metrics": rank_meta, "fallback_ops": fallback}
    values = [r[name]["value"] for r in run.results]
    if check == Check.FSDP:
        verdict = judge_fsdp(values, ref.training(), ref.policy)
    else:
        verdict = judge_tp(values, ref.policy_logits, ref.precise_logits, ref.policy)
    return {"status": verdict.status, "reason": verdict.reason, "metrics": {**verdict.metrics, **rank_meta},
            "fallback_ops": fallback}


def run_distributed(architecture: str, ref: Any, device: str, checks: list[Check], seed: int, *,
                    warm: bool = True) -> GroupRun:
    """One group for the requested distributed checks; printed logs of every rank go to this process's output.
    ``warm``: on this process's warm pair of ``device`` (group.py), else on two ranks that exit after it."""
    names = [str(c) for c in checks if c in DISTRIBUTED_CHECKS]
    deadline = get_settings().arch_timeout_s
    run = run_group(architecture, ref.path, device, names, ref.inputs, seed=seed, deadline_s=deadline,
                    group_timeout_s=min(GROUP_TIMEOUT_S, deadline), warm=warm)
    print(run.describe(), flush=True)
    return run
