"""The pure rules of compat.results over hand-made records: verdicts, coverage (native vs with fallback), the
blocker ranking, and the one factory of records for checks that ended without a verdict."""

from __future__ import annotations

from compat.results import (
    ArchitectureEntry,
    Check,
    ErrorInfo,
    ResultRecord,
    Status,
    arch_verdict,
    blockers,
    check_headline,
    coverage,
    failure_records,
    is_supported,
)


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


def test_coverage_counts_native_fallback_failing_and_known() -> None:
    fb = support("B")
    fb[2] = rec("B", "generate", fallback=["aten::cumsum (Long)"])
    recs = [*support("A"), *fb, *support("C", forward="unsupported_op")]
    recs[-3] = rec("C", "forward", "unsupported_op", "aten::histc (Long)", known="tracked upstream")
    cov = coverage(recs)
    assert cov.architectures == 3 and cov.supported == 2
    assert cov.verdicts["supported"] == 1 and cov.verdicts["supported_with_fallback"] == 1
    assert cov.per_check["forward"]["unsupported_op"] == 1 and cov.known_failures == 1
    assert cov.all_checks_pass(recs) == 2


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


def test_failure_records_give_every_check_the_same_verdict_and_extra_fields() -> None:
    entry = ArchitectureEntry(name="A", model_type="a", rank=3)
    err = ErrorInfo(type="SoftTimeLimitExceeded", message="soft time limit exceeded")
    recs = failure_records(entry, "neuron", [Check.LOAD, Check.TRAIN], Status.TIMEOUT, "soft time limit exceeded",
                           error=err, duration_s=2.5)
    assert [(r.architecture, r.rank, r.device, r.check) for r in recs] == [("A", 3, "neuron", Check.LOAD),
                                                                          ("A", 3, "neuron", Check.TRAIN)]
    assert [(r.status, r.reason, r.error, r.duration_s) for r in recs] == [
        (Status.TIMEOUT, "soft time limit exceeded", err, 2.5)] * 2
    assert failure_records(entry, "cpu", [], Status.ERROR, "none") == []


def test_lora_headline_is_its_own_and_never_part_of_supported() -> None:
    a = [rec("A", c, "pass") for c in ("load", "forward", "generate")] + [rec("A", "lora", "error")]
    b = [rec("B", "load", "error"), rec("B", "lora", "pass")]
    c = [rec("C", "lora", "pass")]
    head = check_headline(a + b + c)
    assert (head.label, head.passed, head.total) == ("fine-tunes with LoRA", 2, 3)
    assert head.text() == "fine-tunes with LoRA: 67% (2 of 3)"
    assert is_supported(a) and not is_supported(b)  # lora failing or passing changes nothing here
    assert check_headline(a[:3]) is None  # no lora record, no headline
