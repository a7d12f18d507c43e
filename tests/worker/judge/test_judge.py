"""The pure judges: Dynamo-style RMSE-vs-fp64 numerics, tie-aware generation parity, reference determinism."""

from __future__ import annotations

import torch

from compat.results import Status
from worker.judge import judge


def _golden(n: int = 4096, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_identical_result_passes() -> None:
    g = _golden()
    ref = g.float()
    assert judge.judge_numerics(ref.clone(), ref, g).passed


def test_rmse_within_multiplier_of_reference_error_passes_and_far_outside_fails() -> None:
    g = _golden() * 100  # large logits: allclose(tol=1e-4) alone cannot pass noise
    ref = g.float()
    ref_err = judge.rmse(g, ref)
    noise = torch.randn(g.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    noise = noise / noise.pow(2).mean().sqrt()  # unit RMS
    close = (g + noise * 1.5 * ref_err).float()  # 1.5x the reference's own error: fp32 multiplier is 2
    far = (g + noise * 1e-2).float()  # ~1e4x the reference error and above tol/10
    v = judge.judge_numerics(close, ref, g)
    assert v.passed, v
    bad = judge.judge_numerics(far, ref, g)
    assert bad.status == Status.MISMATCH
    assert bad.metrics["rmse_device"] > bad.metrics["rmse_bound"]
    assert "RMSE to fp64" in bad.reason


def test_small_tensors_get_the_larger_multiplier() -> None:
    assert judge.multiplier_for("fp32", 999) == 3.0
    assert judge.multiplier_for("fp32", 1000) == 2.0
    assert judge.multiplier_for("bf16_matmul", 10**6) == 3.0


def test_non_finite_and_shape_mismatch_fail() -> None:
    g = _golden(64)
    ref = g.float()
    nan = ref.clone()
    nan[3] = float("nan")
    assert judge.judge_numerics(nan, ref, g).status == Status.MISMATCH
    assert judge.judge_numerics(ref[:10], ref, g).status == Status.MISMATCH


def test_reduced_policy_judged_against_reduced_reference_with_cosine_floor() -> None:
    g = _golden() * 10
    ref_bf16 = g.to(torch.bfloat16).float()  # what a bf16 policy legitimately loses
    # A device that rounds like the policy passes although it is far from the fp32 answer.
    dev = g.to(torch.bfloat16).float()
    assert judge.judge_numerics(dev, ref_bf16, g, "bf16_matmul").passed
    # The same device judged as fp32 is a mismatch: the policy matters.
    assert not judge.judge_numerics(dev, g.float(), g, "fp32").passed
    # An unrelated result fails the cosine floor first.
    junk = torch.randn(g.shape, generator=torch.Generator().manual_seed(7))
    v = judge.judge_numerics(junk, ref_bf16, g, "bf16_matmul")
    assert v.status == Status.MISMATCH and "cosine" in v.reason


def test_missing_golden_uses_reference_alone() -> None:
    ref = _golden().float()
    assert judge.judge_numerics(ref + 1e-6, ref, None).passed  # allclose at tol 1e-4
    assert not judge.judge_numerics(ref + 1e-2, ref, None).passed


def test_generation_identical_passes() -> None:
    v = judge.judge_generation([1, 2, 3], [1, 2, 3], [5.0, 5.0, 5.0], 0.1)
    assert v.passed and v.metrics["matched_tokens"] == 3


def test_generation_divergence_at_a_tie_is_not_a_failure() -> None:
    v = judge.judge_generation([1, 9, 4], [1, 2, 3], [5.0, 0.05, 5.0], 0.1)
    assert v.passed and v.metrics["tie"] and v.metrics["first_divergence"] == 1


def test_generation_divergence_with_clear_margin_is_a_mismatch() -> None:
    v = judge.judge_generation([1, 9, 3], [1, 2, 3], [5.0, 0.5, 5.0], 0.1)
    assert v.status == Status.MISMATCH and v.metrics["first_divergence"] == 1
    assert "token 1" in v.reason


def test_generation_length_difference_is_a_mismatch() -> None:
    assert judge.judge_generation([1, 2], [1, 2, 3], [1.0] * 3, 0.1).status == Status.MISMATCH


def test_reference_determinism() -> None:
    g = _golden()
    run = g.float()
    assert judge.reference_determinism(run, run.clone(), g).passed
    jitter = run + 1e-3 * torch.randn(run.shape, generator=torch.Generator().manual_seed(3))
    v = judge.reference_determinism(run, jitter, g)
    assert v.status == Status.REFERENCE_FAIL and "nondeterministic" in v.reason
    nan = run.clone()
    nan[0] = float("inf")
    assert judge.reference_determinism(nan, nan, g).status == Status.REFERENCE_FAIL


def test_judge_all_first_failure_wins_and_metrics_are_prefixed() -> None:
    ok = judge.Verdict(Status.PASS, {"x": 1})
    bad = judge.Verdict(Status.MISMATCH, {"x": 2}, "grads off")
    v = judge.judge_all({"loss": ok, "grads": bad})
    assert v.status == Status.MISMATCH and v.reason == "grads off"
    assert v.metrics == {"loss.x": 1, "grads.x": 2}


def test_bf16_matmul_emulation_rounds_matmul_operands_only() -> None:
    from worker.run.reference.precision_mode import Bf16MatmulMode

    a = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    b = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    with Bf16MatmulMode():
        got = a @ b
        summed = a + 1e-3  # not a matmul: untouched
    want = a.bfloat16().float() @ b.bfloat16().float()  # bf16 operands, fp32 accumulation
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert not torch.equal(got, a @ b)
    assert torch.equal(summed, a + 1e-3)


def test_reduced_policy_without_fp64_is_measured_against_the_fp32_run() -> None:
    # MoE models whose _grouped_mm has no fp64 kernel have no golden run. Under bf16_matmul the fp32 run is the
    # precise reference: a device that differs from the policy reference by bf16-level rounding (relative 2**-8, the
    # same size as the reference's own rounding) passes; one that is off by 5% does not.
    from pathlib import Path

    from worker.run.reference.reference import Reference

    truth = _golden().float()
    gen = torch.Generator().manual_seed(1)

    def rounded():  # an independent bf16-sized perturbation, like a different matmul rounding order
        return truth * (1 + torch.randn(truth.shape, generator=gen) * 2**-9)

    policy_ref = rounded()
    ref = Reference(path=Path("."), policy="bf16_matmul", seed=0, model=torch.nn.Identity(), inputs={},
                    logits=truth, policy_logits=policy_ref, golden_logits=None,
                    determinism=judge.Verdict(Status.PASS, {}))
    assert ref.precise_logits is truth
    assert judge.judge_numerics(rounded(), policy_ref, ref.precise_logits, ref.policy).passed
    assert not judge.judge_numerics(truth * 1.05, policy_ref, ref.precise_logits, ref.policy).passed
    # Without a precise run the policy reference judges itself with error 0: bf16-level noise would fail.
    assert not judge.judge_numerics(rounded(), policy_ref, None, ref.policy).passed
    fp32 = Reference(path=Path("."), policy="fp32", seed=0, model=torch.nn.Identity(), inputs={}, logits=truth,
                     policy_logits=truth, golden_logits=None, determinism=judge.Verdict(Status.PASS, {}))
    assert fp32.precise_logits is None


def test_train_without_fp64_is_measured_against_the_fp32_step(tmp_path) -> None:  # noqa: ANN001
    # Mixtral's grouped-mm MoE has no fp64 CPU kernel, so there is no golden train step. Under bf16_matmul the fp32
    # step must stand in as the precise reference (as for logits); judged against the policy step itself, the
    # policy step's own error would be 0 and any device with bf16 rounding would be a false mismatch.
    from compat.results import ArchitectureEntry
    from worker.build.build import build_checkpoint
    from worker.run.reference.reference import prepare_reference

    entry = ArchitectureEntry(name="MixtralForCausalLM", model_type="mixtral", rank=1)
    built = build_checkpoint(entry, tmp_path / "ckpt", seed=0)
    ref = prepare_reference(built.path, "bf16_matmul", seed=0)
    refs = ref.training()
    assert refs["golden"] is None
    assert refs["precise"] is refs["fp32"]
    # The fp32 step differs from the bf16-policy step by rounding only: measured against it, the policy step passes,
    # while a step with gradients off by 5% does not (tolerances: Dynamo's, see worker/judge.py).
    pol, fp32 = refs["policy"], refs["fp32"]
    assert judge.judge_numerics(pol["grads"], pol["grads"], fp32["grads"], "bf16_matmul").passed
    assert not judge.judge_numerics(pol["grads"] * 1.05, pol["grads"], fp32["grads"], "bf16_matmul").passed
