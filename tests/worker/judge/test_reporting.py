"""Coverage (native vs with fallback) and the blocker ranking, over hand-made records."""

from __future__ import annotations

from rich.console import Console

from compat.results import Check, ResultRecord, Status
from worker.judge.reporting import arch_verdict, blockers, coverage, coverage_table, results_table


def rec(arch: str, check: str, status: str = "pass", op: str | None = None, fallback=(), known=None):  # noqa: ANN001, ANN201
    return ResultRecord(architecture=arch, device="neuron", check=Check(check), status=Status(status),
                        blocking_op=op, fallback_ops=list(fallback), known_issue=known)


def support(arch: str, **over: str) -> list[ResultRecord]:
    return [rec(arch, c, over.get(c, "pass")) for c in ("load", "forward", "generate", "train")]


def test_verdicts() -> None:
    assert arch_verdict(support("A")) == "supported"
    fb = support("B")
    fb[1] = rec("B", "forward", fallback=["aten::histc (Float)"])
    assert arch_verdict(fb) == "supported_with_fallback"
    assert arch_verdict(support("C", generate="mismatch")) == "failing"
    assert arch_verdict(support("D", train="mismatch")) == "supported"  # train is not a support check
    assert arch_verdict([rec("E", c, "skipped") for c in ("load", "forward", "generate")]) == "skipped"
    assert arch_verdict([rec("F", c, "reference_fail") for c in ("load", "forward", "generate")]) == "reference_fail"
    assert arch_verdict([rec("G", "load"), rec("G", "forward")]) == "not_judged"


def test_coverage_counts_and_table() -> None:
    fb = support("B")
    fb[2] = rec("B", "generate", fallback=["aten::cumsum (Long)"])
    recs = [*support("A"), *fb, *support("C", forward="unsupported_op")]
    recs[-3] = rec("C", "forward", "unsupported_op", "aten::histc (Long)", known="tracked upstream")
    cov = coverage(recs)
    assert cov.architectures == 3 and cov.supported == 2
    assert cov.verdicts["supported"] == 1 and cov.verdicts["supported_with_fallback"] == 1
    assert cov.per_check["forward"]["unsupported_op"] == 1 and cov.known_failures == 1
    assert cov.all_checks_pass(recs) == 2
    table = coverage_table(recs)
    assert "1 supported natively, 1 with CPU fallback, 1 failing" in table.caption


def test_blockers_rank_by_architectures_blocked_and_count_sole_unlocks() -> None:
    recs = [
        rec("A", "forward", "unsupported_op", "aten::histc (Long)"),
        rec("A", "generate", "unsupported_op", "aten::histc (Long)"),
        rec("B", "forward", "unsupported_dtype", "aten::histc (Int)"),
        rec("B", "train", "unsupported_op", "aten::_foreach_mul"),
        rec("C", "forward", "unsupported_op", "aten::_foreach_mul"),
        rec("D", "forward", "unsupported_op", "aten::histc (Long)"),
        rec("D", "generate", "error"),  # a failure naming no op: no single op unlocks D
        rec("E", "forward", "pass"),
    ]
    ranked = blockers(recs)
    assert [b.op for b in ranked] == ["aten::histc", "aten::_foreach_mul"]
    histc = ranked[0]
    assert histc.architectures == ["A", "B", "D"]
    assert histc.unlocks == ["A"]  # B also needs _foreach_mul, D has an unexplained error
    assert histc.variants == ["aten::histc (Int)", "aten::histc (Long)"]
    assert histc.message == "implement aten::histc to unlock 1 architecture(s) (blocks 3)"
    assert ranked[1].unlocks == ["C"]


def test_known_issues_mark_matching_failures_only() -> None:
    from worker.judge.known_issues import annotate, load_known_issues

    issues = load_known_issues()  # the shipped file must parse
    recs = [rec("Qwen3MoeForCausalLM", "forward", "unsupported_dtype", "aten::histc (Int)"),
            rec("Qwen3MoeForCausalLM", "forward", "unsupported_op", "aten::cumsum (Long)"),
            rec("LlamaForCausalLM", "forward", "pass")]
    out = annotate(recs, issues)
    assert out[0].known_issue and "histc" in out[0].known_issue
    assert out[1].known_issue is None and out[2].known_issue is None
    on_cpu = recs[0].model_copy(update={"device": "cpu"})
    assert annotate([on_cpu], issues)[0].known_issue is None  # the histc entry is for neuron only


def test_results_table_shows_known_issue_and_fallback_text_verbatim() -> None:
    # Bracketed notes look like rich markup; they must be printed, not swallowed as tags.
    recs = [rec("M", "forward", "unsupported_dtype", op="aten::histc (Int)", known="MoE histc on ints"),
            rec("M", "generate", fallback=["aten::_is_all_true (Bool)"])]
    console = Console(width=200, record=True)
    console.print(results_table(recs, title="M"))
    text = console.export_text()
    assert "[known: MoE histc on ints]" in text
    assert "[fallback: aten::_is_all_true (Bool)]" in text
    assert "unsupported_dtype" in text and "aten::histc (Int)" in text
