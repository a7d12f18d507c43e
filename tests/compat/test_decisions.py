"""The headline's range rule (compat/decisions.py): which architectures a switch touches, what an option moves, the
one spelling of the range, and what-if answers that never guess an unmeasured combination."""

from __future__ import annotations

from compat.decisions import affected, effect_of, headline_range, rejudge_fallback, restrict, touches, whatif
from compat.results import ResultRecord

SORT = {"id": "integer_sort_topk", "ops": ["aten::sort", "aten::topk"], "dtypes": ["Int", "Long"]}
ARGMAX = {"id": "argmax_device", "ops": ["aten::argmax"]}
COMPLEX = {"id": "complex_eager", "ops": [], "dtypes": ["ComplexFloat"]}


def _rec(arch: str, check: str, status: str = "pass", fallback: list[str] | None = None,
         op: str | None = None) -> ResultRecord:
    return ResultRecord(architecture=arch, device="neuron", check=check, status=status, fallback_ops=fallback or [],
                        blocking_op=op)


def test_a_switch_touches_its_ops_on_its_dtypes_only():
    assert touches(SORT, ["aten::sort (Long)"]) and touches(SORT, ["aten::topk (Int, Int)"])
    assert not touches(SORT, ["aten::sort (Float)"]) and not touches(SORT, ["aten::argsort (Long)"])
    assert touches(ARGMAX, ["aten::argmax (Float)"]) and touches(COMPLEX, ["aten::mul (ComplexFloat, Float)"])
    assert not touches(COMPLEX, ["aten::mul (Float)"]) and not touches({"id": "empty"}, ["aten::mul (Float)"])


def test_affected_reads_traces_and_support_check_records():
    traces = {"Moe": ["aten::mm (Float)", "aten::sort (Long)"], "Dense": ["aten::mm (Float)"]}
    records = [_rec("Blocked", "forward", "unsupported_op", op="aten::sort (Long)"),
               _rec("Trained", "train", "unsupported_op", op="aten::sort (Long)")]  # not a support check
    assert affected(SORT, traces, records) == ["Blocked", "Moe"]


def test_an_effect_counts_gains_losses_and_native_moves_and_unmeasured_reruns():
    base = {"A": "failing", "B": "supported", "C": "supported_with_fallback", "D": "supported"}
    under = {"A": "supported_with_fallback", "B": "failing", "C": "supported"}
    eff = effect_of({"s": "x"}, "subject", "low", ["src"], "rerun", base, under, ["A", "B", "C", "D"])
    assert (eff.gains, eff.losses, eff.native_gains, eff.native_losses) == (["A"], ["B"], ["C"], ["B"])
    assert eff.unmeasured == ["D"] and eff.moves == 0 and eff.native_moves == 0
    assert restrict(eff, ["A", "C"]).gains == ["A"] and restrict(eff, ["A", "C"]).losses == []


def test_a_fallback_only_switch_is_re_judged_from_stored_fallback_ops():
    records = [_rec("Gpt", "load"), _rec("Gpt", "forward"), _rec("Gpt", "generate", fallback=["aten::argmax (Float)"]),
               _rec("Both", "load"), _rec("Both", "forward", fallback=["aten::histc (Int)"]),
               _rec("Both", "generate", fallback=["aten::argmax (Float)"])]
    assert rejudge_fallback([ARGMAX], records) == {"Gpt": "supported", "Both": "supported_with_fallback"}


def test_the_range_text_names_each_decision_and_the_measured_combination():
    single = effect_of({"grouped_mm_preconditions": "not_enforced"}, "`_grouped_mm` alignment", "medium", [], "rerun",
                       {"M": "failing"}, {"M": "failing"}, ["M"])
    loss = effect_of({"complex_eager": "raises"}, "complex in eager", "medium", [], "rerun",
                     {"L": "supported"}, {"L": "failing"}, ["L"])
    both = effect_of({"grouped_mm_preconditions": "not_enforced", "integer_sort_topk": "runs"}, "both", "medium", [],
                     "rerun", {"M": "failing"}, {"M": "supported"}, ["M"])
    rng = headline_range(126, 181, [single, loss, both])
    assert (rng.low, rng.high) == (125, 127)
    assert rng.text() == ("126 (69.6%) out of the box; 125–127 across 2 decision(s): `_grouped_mm` alignment (medium) "
                          "moves 0; complex in eager (medium) moves -1, native -1; grouped_mm_preconditions + integer_sort_topk "
                          "together move +1")
    assert headline_range(5, 10, []).text() == "5 (50.0%) out of the box"


def test_whatif_answers_measured_settings_and_refuses_to_guess_the_rest():
    both = effect_of({"a": "x", "b": "y"}, "a + b", "low", [], "rerun", {"M": "failing"}, {"M": "supported"}, ["M"])
    found, text = whatif({"b": "y", "a": "x"}, 10, 20, [both])
    assert found is both and text.startswith("a=x,b=y: 11 (55.0%) out of the box, +1 (was 10)")
    assert "now supported: M" in text
    found, text = whatif({"a": "x"}, 10, 20, [both])
    assert found is None and text.startswith("not measured: a=x") and "compat sweep --switch a=x" in text


def test_whatif_says_no_change_as_such_and_how_it_was_measured_in_plain_words():
    # Issue 30: "0 (was 125)" read as a drop to zero, and "measured by re-judged" is not a phrase.
    still = effect_of({"argmax_device": "native"}, "argmax on the device", "low", [], "traces",
                      {"M": "supported_with_fallback"}, {"M": "supported_with_fallback"}, ["M"])
    _, text = whatif({"argmax_device": "native"}, 125, 181, [still])
    assert text == ("argmax_device=native: 125 (69.1%) out of the box, unchanged; native unchanged; re-judged from "
                    "the stored CPU fallback ops of 1 architecture")
    rerun = effect_of({"a": "x"}, "a", "low", [], "rerun", {"M": "failing", "N": "failing"},
                      {"M": "supported", "N": "failing"}, ["M", "N"])
    _, text = whatif({"a": "x"}, 10, 20, [rerun])
    assert "measured by re-running the 2 affected architectures" in text and "measured by re-judged" not in text
