"""The pure rules of compat.results over hand-made records: verdicts, coverage (native vs with fallback), the
blocker ranking, and the one factory of records for checks that ended without a verdict."""

from __future__ import annotations

from compat.chains import blocker_report
from compat.coverage import coverage, fallback_ranking
from compat.results import (
    ArchitectureEntry,
    Check,
    ErrorInfo,
    ResultRecord,
    Status,
    arch_verdict,
    check_headline,
    failure_records,
    is_supported,
    percent,
    scope_label,
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


def test_first_blockers_rank_by_architectures_and_never_claim_an_unlock() -> None:
    # No chain measured (a device that cannot move an op to the CPU): each architecture's first blocker only, and
    # what implementing it unlocks is unknown (None), whatever else the records name.
    recs = [
        rec("A", "forward", "unsupported_op", "aten::histc (Long)"),
        rec("A", "generate", "unsupported_op", "aten::histc (Long)"),
        rec("B", "forward", "unsupported_dtype", "aten::histc (Int)"),
        rec("B", "train", "unsupported_op", "aten::_foreach_mul"),
        rec("C", "forward", "unsupported_op", "aten::_foreach_mul"),
        rec("D", "forward", "unsupported_op", "aten::histc (Long)"),
        rec("D", "generate", "unsupported_op", "aten::cumsum (Int)"),  # behind histc: not its first blocker
        rec("E", "forward", "pass"),
    ]
    got = blocker_report(recs)
    assert [b.op for b in got.blockers] == ["aten::histc", "aten::_foreach_mul"]
    histc = got.blockers[0]
    assert histc.architectures == histc.first == ["A", "B", "D"] and histc.unlocks is None
    assert histc.variants == ["aten::histc (Int)", "aten::histc (Long)"]
    assert "only the first blocker is known" in histc.message and "unlock" in histc.message
    assert got.blockers[1].architectures == ["C"]  # B's train failure is not a support check
    assert not got.measured and got.unlock_sets == [] and "only the first blocker is known" in got.note


def test_no_verdict_statuses_are_never_failing_or_blocking() -> None:
    # harness_error and reference_fail say nothing about the device: not failing, no blocker of their own.
    recs = [rec("H", "load"), rec("H", "forward", "unsupported_op", "aten::histc (Long)"),
            rec("H", "generate", "harness_error"),
            rec("R", "load", "reference_fail"), rec("R", "forward", "reference_fail"), rec("R", "generate", "skipped")]
    assert arch_verdict([r for r in recs if r.architecture == "R"]) == "reference_fail"
    assert arch_verdict([rec("X", "load"), rec("X", "forward"), rec("X", "generate", "harness_error")]) == \
        "not_judged"
    got = blocker_report(recs)
    assert [(b.op, b.architectures, b.unlocks) for b in got.blockers] == [("aten::histc", ["H"], None)]


def test_coverage_over_a_catalog_counts_architectures_without_records_as_not_judged() -> None:
    cov = coverage([*support("A"), *support("B", load="error")], catalog=["A", "B", "C"])
    assert cov.architectures == 3 and cov.supported == 1 and cov.verdicts["not_judged"] == 1
    assert percent(cov.supported, cov.architectures) == "33.3%" and percent(0, 0) == "0.0%"


def test_scope_labels_say_what_a_share_is_of() -> None:
    assert scope_label("registry", None, "full", 181) == "unranked: Transformers' registry, alphabetical"
    assert scope_label("snapshot", "abc123", "full", 100) == "Hub ranking by downloads, snapshot abc123"
    assert scope_label("hub", None, "selection", 2) == "selection of 2 architecture(s), not the headline"


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


def test_fallback_ranking_counts_the_architectures_an_op_takes_off_the_cpu() -> None:
    a = support("A")
    a[1] = rec("A", "forward", fallback=["aten::cumsum (Long)"])
    b = support("B")
    b[1] = rec("B", "forward", fallback=["aten::cumsum (Int)", "aten::histc (Float)"])
    c = support("C", forward="unsupported_op")  # failing: its fallback ops are not what keeps it off native
    c[0] = rec("C", "load", fallback=["aten::histc (Float)"])
    t = support("T")
    t[3] = rec("T", "train", fallback=["aten::sort (Float)"])  # train is not a support check: T is native
    ranked = fallback_ranking([*a, *b, *c, *t])
    assert [(f.op, f.architectures, f.offloads) for f in ranked] == [
        ("aten::cumsum", ["A", "B"], ["A"]), ("aten::histc", ["B"], [])]
    assert ranked[0].message == "implement aten::cumsum natively to take 1 architecture(s) off the CPU (falls back in 2)"
    cov = coverage([*a, *b, *c, *t])
    assert (cov.supported, cov.native, cov.failing) == (3, 1, 1)


def test_lora_headline_is_its_own_and_never_part_of_supported() -> None:
    a = [rec("A", c, "pass") for c in ("load", "forward", "generate")] + [rec("A", "lora", "error")]
    b = [rec("B", "load", "error"), rec("B", "lora", "pass")]
    c = [rec("C", "lora", "pass")]
    head = check_headline(a + b + c)
    assert (head.label, head.passed, head.total) == ("fine-tunes with LoRA", 2, 3)
    assert head.text() == "fine-tunes with LoRA: 66.7% (2 of 3)"
    assert is_supported(a) and not is_supported(b)  # lora failing or passing changes nothing here
    assert check_headline(a[:3]) is None  # no lora record, no headline
