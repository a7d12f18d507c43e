"""The calibration rule on hand-made observations and records: agreement both ways, what is not counted and why,
causes that name the op and the source, kept reasons, and which class and config the simulation runs."""

from __future__ import annotations

from compat.native import NativeRegistry
from compat.results import Check, ErrorInfo, ResultRecord, Status
from neuron_backend.hardware.observations import Observation, Run, Source
from worker.judge.calibration import (
    CAUSE_UNKNOWN,
    DIFFERENT_CAUSE,
    NO_OBSERVED,
    NO_VERDICT,
    NOT_JUDGED,
    SAME_CAUSE,
    Target,
    agreement,
    cause_match,
    compare,
    observed,
    plan_target,
    simulated,
)

SOURCES = {
    "A_leaderboard": Source("A_leaderboard", "arminagha1234/trainium-optimizer", "LEADERBOARD.md", "b7b6cbad", "A",
                            True, ""),
    "A_history": Source("A_history", "arminagha1234/trainium-optimizer", "HISTORY.tsv", "0a1719dd", "A", True, ""),
}
EVRF013 = "[NCC_EVRF013] TopK custom operation does not support 32-bit and 64-bit integer types."


def obs(model: str, arch: str, *runs: Run, source: str = "A_leaderboard", toolchain: str = "tc1") -> Observation:
    return Observation(model, arch, True, "", toolchain, runs, source)


def run(outcome: str, *, mode: str = "eager", patched: bool = False, error: str | None = None,
        op: str | None = None, source: str | None = None) -> Run:
    return Run("prefill_forward", mode, outcome, patched, "", error, op, source)


def rec(arch: str, check: Check, status: Status, *, op: str | None = None, known: str | None = None,
        fallback: tuple[str, ...] = (), reason: str | None = None) -> ResultRecord:
    err = ErrorInfo(type="NeuronUnsupportedOpError", message=f"{op} failed\nmore") if op else None
    return ResultRecord(architecture=arch, device="neuron", check=check, status=status, blocking_op=op,
                        known_issue=known, fallback_ops=list(fallback), error=err, reason=reason)


def ran(arch: str, *, fallback: tuple[str, ...] = (), status: Status = Status.PASS) -> list[ResultRecord]:
    return [rec(arch, Check.LOAD, Status.PASS), rec(arch, Check.FORWARD, status, fallback=fallback)]


def target(arch: str) -> Target:
    return Target(arch, judged=arch, model_type="x")


def test_both_ran_agrees_without_a_cause() -> None:
    row = compare(target("GPT2LMHeadModel"), [obs("openai-community/gpt2", "GPT2LMHeadModel", run("pass"))],
                  ran("GPT2LMHeadModel"), "prefill_forward", "eager", SOURCES)
    assert row is not None and row.agrees is True and row.cause is None and row.check == Check.FORWARD


def test_simulation_failing_where_hardware_ran_names_the_op_the_known_issue_and_the_source() -> None:
    recs = [rec("M", Check.LOAD, Status.PASS),
            rec("M", Check.FORWARD, Status.UNSUPPORTED_OP, op="aten::sort (Long)",
                known="integer sort lowers to AwsNeuronTopK (NCC_EVRF013) (link: rules.py)")]
    row = compare(target("M"), [obs("org/m", "M", run("pass"))], recs, "prefill_forward", "eager", SOURCES)
    assert row.agrees is False
    assert row.cause == ("simulation fails at aten::sort (Long): profile known issue: integer sort lowers to "
                         "AwsNeuronTopK; real hardware ran it (org/m, source A LEADERBOARD.md)")


def test_hardware_failing_where_the_simulation_ran_names_the_error_and_the_fallback() -> None:
    observations = [obs("allenai/OLMoE-1B-7B-0924", "OlmoeForCausalLM",
                        run("fail", error=EVRF013, op="aten::sort", source="A_history"))]
    row = compare(target("OlmoeForCausalLM"), observations, ran("OlmoeForCausalLM", fallback=("aten::sort (Long)",)),
                  "prefill_forward", "eager", SOURCES)
    assert row.agrees is False
    assert row.cause == ("real hardware failed at aten::sort: [NCC_EVRF013] TopK custom operation does not support "
                         "32-bit and 64-bit integer types (allenai/OLMoE-1B-7B-0924, source A HISTORY.tsv); the "
                         "simulation ran it, aten::sort (Long) on the CPU fallback")


def test_a_failure_without_a_recorded_cause_says_so() -> None:
    row = compare(target("Phi3ForCausalLM"), [obs("microsoft/phi-4", "Phi3ForCausalLM", run("fail"),
                                                  source="A_history")],
                  ran("Phi3ForCausalLM"), "prefill_forward", "eager", SOURCES)
    assert row.agrees is False
    assert row.cause.startswith("real hardware failed, real cause not recorded (microsoft/phi-4, source A HISTORY")


def test_both_failing_agree_and_say_when_their_recorded_reasons_differ() -> None:
    recs = [rec("M", Check.LOAD, Status.PASS), rec("M", Check.FORWARD, Status.UNSUPPORTED_OP,
                                                   op="aten::_grouped_mm (Float, Int)")]
    row = compare(target("M"), [obs("m", "M", run("fail", error=EVRF013, op="aten::sort"))], recs,
                  "prefill_forward", "eager", SOURCES)
    assert row.agrees is True
    assert row.cause == ("both fail, differently: real hardware at aten::sort: [NCC_EVRF013] TopK custom operation "
                         "does not support 32-bit and 64-bit integer types (m, source A LEADERBOARD.md); the "
                         "simulation at aten::_grouped_mm (Float, Int)")
    oom = compare(target("M"), [obs("m", "M", run("fail", error="OOM at ~22 GB allocated per core"))], recs,
                  "prefill_forward", "eager", SOURCES)
    assert oom.agrees is True and oom.cause.startswith("both fail, differently: real hardware: OOM at ~22 GB")
    same = [recs[0], rec("M", Check.FORWARD, Status.UNSUPPORTED_OP, op="aten::sort (Long)")]
    at_sort = compare(target("N"), [obs("n", "N", run("fail", op="aten::sort"))], same, "prefill_forward", "eager",
                      SOURCES)
    assert at_sort.agrees is True and at_sort.cause is None
    unrecorded = compare(target("U"), [obs("u", "U", run("fail"))], recs, "prefill_forward", "eager", SOURCES)
    assert unrecorded.agrees is True
    passes = compare(target("G"), [obs("g", "G", run("pass"))], ran("G"), "prefill_forward", "eager", SOURCES)
    assert [cause_match(r) for r in (row, oom, at_sort, unrecorded, passes)] == [
        DIFFERENT_CAUSE, DIFFERENT_CAUSE, SAME_CAUSE, CAUSE_UNKNOWN, SAME_CAUSE]
    # Issue 30 item 3: the headline counts only the same result for the same cause, and says so first; the rows
    # that agree in outcome only are counted, and named, apart.
    fig = agreement([row, oom, at_sort, unrecorded, passes], Check.FORWARD)
    assert (fig.strict, fig.agrees, fig.counted) == (2, 5, 5)
    assert fig.line() == ("forward: same result for the same cause on 2 of 5 observed architectures (40.0%); same "
                          "outcome on 5 of 5 (100.0%), counting 2 failing on both sides for different recorded "
                          "reasons (M, M) and 1 failing on both sides with the real cause not recorded (U)")


def test_a_model_that_does_not_load_fails_at_load_and_a_mismatch_still_ran() -> None:
    no_load = [rec("M", Check.LOAD, Status.ERROR, op="aten::empty_strided (Float)"),
               rec("M", Check.FORWARD, Status.SKIPPED, reason="load failed")]
    sim = simulated(no_load, Check.FORWARD)
    assert (sim.outcome, sim.check, sim.text) == ("fail", "load", "load error [aten::empty_strided (Float)]")
    mismatch = simulated(ran("M", status=Status.MISMATCH), Check.FORWARD)
    assert (mismatch.outcome, mismatch.status) == ("pass", "mismatch")
    row = compare(target("M"), [obs("m", "M", run("fail"))], ran("M", status=Status.MISMATCH), "prefill_forward",
                  "eager", SOURCES)
    assert row.agrees is False and "(numerics off the CPU reference: mismatch)" in row.cause


def test_unknown_partial_no_verdict_and_not_judged_are_not_counted() -> None:
    patched_only = obs("p", "P", run("pass", patched=True))  # the unpatched model's outcome is unknown
    split = [obs("a", "S", run("pass")), obs("b", "S", run("fail"))]
    assert observed([patched_only], "prefill_forward", "eager").outcome == "unknown"
    both = observed(split, "prefill_forward", "eager")
    assert (both.outcome, both.why) == ("partial", "fail: b; pass: a")
    rows = [
        compare(target("P"), [patched_only], ran("P"), "prefill_forward", "eager", SOURCES),
        compare(target("S"), split, ran("S"), "prefill_forward", "eager", SOURCES),
        compare(target("R"), [obs("r", "R", run("pass"))],
                [rec("R", Check.LOAD, Status.REFERENCE_FAIL, reason="reference: nondeterministic"),
                 rec("R", Check.FORWARD, Status.REFERENCE_FAIL)], "prefill_forward", "eager", SOURCES),
        compare(Target("D", not_judged="not a class of Transformers 5.23.0"), [obs("d", "D", run("fail"))], [],
                "prefill_forward", "eager", SOURCES),
        compare(target("G"), [obs("g", "G", run("pass"))], ran("G"), "prefill_forward", "eager", SOURCES),
        compare(target("H"), [obs("h", "H", run("fail"))], ran("H"), "prefill_forward", "eager", SOURCES),
    ]
    assert [r.not_counted for r in rows] == [NO_OBSERVED, NO_OBSERVED, NO_VERDICT, NOT_JUDGED, None, None]
    assert [r.agrees for r in rows] == [None, None, None, None, True, False]
    assert rows[1].cause == "observed partial (fail: b; pass: a)"
    assert rows[2].cause == "simulation load reference_fail: reference: nondeterministic"
    fig = agreement(rows, Check.FORWARD)
    assert (fig.agrees, fig.counted, [r.architecture for r in fig.disagreements]) == (1, 2, ["H"])
    assert fig.line() == ("forward: same result for the same cause on 1 of 2 observed architectures (50.0%); 4 not "
                          "counted: 1 not judged "
                          "(not in the installed Transformers, or remote code), 2 observed outcome unknown or "
                          "partial, 1 the simulation gave no verdict (reference_fail, harness_error or skipped)")


def test_kept_reasons_go_on_disagreements_of_their_check_only() -> None:
    kept = {"microsoft/phi-4": {"reason": "0.0 throughput, no error recorded", "source": "A_history"},
            "G": {"reason": "never shown: G agrees", "source": "A_leaderboard"},
            "Q": {"reason": "compile only", "source": "A_leaderboard", "check": "compile"}}
    phi = compare(target("Phi3ForCausalLM"), [obs("microsoft/phi-4", "Phi3ForCausalLM", run("fail"))],
                  ran("Phi3ForCausalLM"), "prefill_forward", "eager", SOURCES, kept)
    assert phi.kept == "0.0 throughput, no error recorded (source A HISTORY.tsv)"
    g = compare(target("G"), [obs("g", "G", run("pass"))], ran("G"), "prefill_forward", "eager", SOURCES, kept)
    assert g.agrees is True and g.kept is None
    q = compare(target("Q"), [obs("q", "Q", run("fail"))], ran("Q"), "prefill_forward", "eager", SOURCES, kept)
    assert q.agrees is False and q.kept is None


def test_compile_rows_exist_only_where_compile_was_observed() -> None:
    observations = [obs("q", "Q", run("pass"), run("fail", mode="compile", op="aten::tril"))]
    recs = [*ran("Q"), rec("Q", Check.COMPILE, Status.PASS)]
    row = compare(target("Q"), observations, recs, "prefill_forward", "compile", SOURCES)
    assert (row.check, row.agrees) == (Check.COMPILE, False)
    assert row.cause.startswith("real hardware failed at aten::tril (error not recorded)")
    assert compare(target("G"), [obs("g", "G", run("pass"))], ran("G"), "prefill_forward", "compile", SOURCES) is None
    assert compare(target("G"), [obs("g", "G", run("pass"))], ran("G"), "train", "compile", SOURCES) is None


REGISTRY = NativeRegistry(
    version="5.23.0", model_types=frozenset({"phi3", "qwen3_5", "llama"}),
    classes=frozenset({"Phi3ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM",
                       "LlamaForCausalLM"}),
    causal_lm={"phi3": "Phi3ForCausalLM", "qwen3_5": "Qwen3_5ForCausalLM", "llama": "LlamaForCausalLM"})


def test_plan_prefers_an_observed_models_real_config() -> None:
    observations = [obs("microsoft/Phi-3.5-mini-instruct", "Phi3ForCausalLM", run("fail")),
                    obs("microsoft/phi-4", "Phi3ForCausalLM", run("fail"))]
    configs = {"microsoft/phi-4": ("phi4.json", {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"]})}
    t = plan_target("Phi3ForCausalLM", observations, REGISTRY, {"Phi3ForCausalLM": "phi3"}, configs)
    assert (t.judged, t.model_type, t.model_id, t.config_label) == (
        "Phi3ForCausalLM", "phi3", "microsoft/phi-4", "microsoft/phi-4 (phi4.json)")
    bare = plan_target("LlamaForCausalLM", [obs("x", "LlamaForCausalLM")], REGISTRY, {"LlamaForCausalLM": "llama"},
                       {})
    assert (bare.judged, bare.config_label) == ("LlamaForCausalLM", "llama config defaults")


def test_plan_judges_a_wrapper_class_as_the_causal_lm_the_runs_loaded_and_refuses_remote_code() -> None:
    wrapper = plan_target("Qwen3_5ForConditionalGeneration", [obs("Qwen/Qwen3.5-0.8B", "Q")], REGISTRY,
                          {"Qwen3_5ForConditionalGeneration": "qwen3_5"}, {})
    assert (wrapper.judged, wrapper.model_type) == ("Qwen3_5ForCausalLM", "qwen3_5")
    assert "AutoModelForCausalLM builds Qwen3_5ForCausalLM" in wrapper.note
    remote = plan_target("DeepseekForCausalLM", [obs("deepseek-ai/deepseek-moe-16b-base", "D")], REGISTRY, {}, {})
    assert remote.judged is None and remote.not_judged.startswith("not a class of Transformers 5.23.0")
    foreign = plan_target("Phi3ForCausalLM", [obs("m", "Phi3ForCausalLM")], REGISTRY, {},
                          {"m": ("m.json", {"model_type": "phi-msft", "architectures": ["Phi3ForCausalLM"]})})
    assert foreign.judged is None and "model_type 'phi-msft' is not native" in foreign.not_judged
