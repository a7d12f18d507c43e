"""The diff with the flake guard's re-run, what moved and the signatures (compat.diff); the gate on them."""

from __future__ import annotations

from compat.diff import diff_results, format_diff, gate
from compat.results import Check, ErrorInfo, ResultRecord, Status


def rec(arch: str, check: str, status: Status, op: str | None = None, msg: str | None = None) -> ResultRecord:
    return ResultRecord(architecture=arch, device="neuron", check=Check(check), status=status, blocking_op=op,
                        error=ErrorInfo(type="NeuronUnsupportedOpError", message=msg) if msg else None)


BASE = [rec(a, c, Status.PASS) for a in ("A", "B", "C") for c in ("load", "forward")]
NOW = [rec("A", "load", Status.PASS), rec("A", "forward", Status.MISMATCH, msg="logits differ by 0.5"),
       rec("B", "load", Status.PASS), rec("B", "forward", Status.UNSUPPORTED_OP, "aten::sort (Int)", "NCC_EVRF013"),
       rec("C", "load", Status.PASS), rec("C", "forward", Status.UNSUPPORTED_OP, "aten::sort (Int)", "NCC_EVRF013")]


def test_a_regression_that_passes_on_its_rerun_is_flaky_and_the_gate_passes_on_flaky_alone() -> None:
    rerun = [rec("A", "load", Status.PASS), rec("A", "forward", Status.PASS)]
    d = diff_results(BASE, NOW[:2], baseline_run="r1", current_run="r2", rerun=rerun, rerun_run="r3",
                     only=["A"])
    assert d.regressions == [] and [(c.architecture, c.check, c.rerun) for c in d.flaky] == [("A", "forward", "pass")]
    assert d.signatures == [] and d.rerun_run == "r3"
    verdict = gate(d, state="complete", planned=2, missing=0, fail_on_regression=True)
    assert verdict.code == 0
    assert "flaky      A [neuron] forward: pass -> mismatch" in verdict.lines[0]
    assert "0 regression(s)" in verdict.lines[0] and "1 flaky (re-run r3)" in verdict.lines[0]


def test_only_regressions_the_rerun_confirmed_fail_the_gate() -> None:
    rerun = [rec("A", "forward", Status.PASS), rec("B", "forward", Status.UNSUPPORTED_OP, "aten::sort (Int)")]
    d = diff_results(BASE, NOW, baseline_run="r1", current_run="r2", rerun=rerun, rerun_run="r3")
    assert [(c.architecture, c.rerun) for c in d.regressions] == [("B", "unsupported_op"), ("C", None)]
    assert [c.architecture for c in d.flaky] == ["A"]
    assert gate(d, state="complete", planned=6, missing=0, fail_on_regression=True).code == 1
    # The new failures, flaky ones left out: one signature for B and C.
    assert [(s.count, s.op, s.error, s.architectures) for s in d.signatures] == [
        (2, "aten::sort (Int)", "NeuronUnsupportedOpError: NCC_EVRF013", ["B", "C"])]


def test_what_moved_is_printed_above_the_regressions() -> None:
    before = {"transformers": "5.23.0", "switch integer_sort_topk": "runs", "mode": "fallback"}
    after = {"transformers": "5.23.0", "switch integer_sort_topk": "fails", "mode": "fallback"}
    d = diff_results(BASE, NOW, baseline_run="r1", current_run="r2", determinants=(before, after))
    text = format_diff(d).splitlines()
    assert text[1] == "moved      switch integer_sort_topk: runs -> fails"
    assert text[2].startswith("REGRESSION ")
    assert "1 determinant(s) moved" in text[0]
    assert d.as_dict()["moved"][0]["line"] == "switch integer_sort_topk: runs -> fails"
    assert [s["count"] for s in d.as_dict()["signatures"]] == [2, 1]
