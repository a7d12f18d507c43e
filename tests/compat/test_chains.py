"""Blocker chains (compat.chains) over hand-made records: how a chain grows from re-runs and how it ends, and the
ranking every reader shows: "implement X to unlock N" counts only chains that are {X}; shared chains rank as sets."""

from __future__ import annotations

from compat.chains import MAX_LINKS, Chain, ChainEnd, Link, blocker_report, extend, first_link, rank
from compat.results import Check, ErrorInfo, ResultRecord, Status

SORT, GMM, HISTC = "aten::sort (Int)", "aten::_grouped_mm (Float, Int)", "aten::histc (Long)"


def rec(arch: str, check: str, status: str = "pass", op: str | None = None, fallback=(), error=None):  # noqa: ANN001, ANN201
    return ResultRecord(architecture=arch, device="neuron", check=Check(check), status=Status(status),
                        blocking_op=op, fallback_ops=list(fallback), error=error)


def run(arch: str, forward: tuple = ("pass",), generate: tuple = ("pass",), load: tuple = ("pass",)) -> list:
    return [rec(arch, "load", *load), rec(arch, "forward", *forward), rec(arch, "generate", *generate)]


def moe_chains() -> list[Chain]:
    """JetMoe passes once sort runs on the CPU; Mixtral then stops at _grouped_mm and passes with both moved (what
    the acceptance sweep measures)."""
    jet = first_link(run("JetMoe", ("unsupported_op", SORT), ("unsupported_op", SORT)))
    mix = first_link(run("Mixtral", ("unsupported_op", SORT), ("unsupported_op", SORT)))
    jet = extend(jet, run("JetMoe", ("pass", None, [SORT]), ("pass", None, [SORT])))
    mix = extend(mix, run("Mixtral", ("unsupported_op", GMM), ("unsupported_op", GMM)))
    assert mix.end == ChainEnd.UNKNOWN  # still open: re-run with both
    mix = extend(mix, run("Mixtral", ("pass", None, [SORT, GMM]), ("pass", None, [SORT])))
    return [jet, mix]


def test_a_chain_grows_one_op_per_rerun_until_a_pass() -> None:
    jet, mix = moe_chains()
    assert (jet.end, [link.op for link in jet.links]) == (ChainEnd.PASS, [SORT])
    assert (mix.end, mix.ops) == (ChainEnd.PASS, ["aten::sort", "aten::_grouped_mm"])
    assert mix.text() == "aten::sort (Int) → aten::_grouped_mm (Float, Int) → pass"
    assert mix.links[1].check == "forward" and mix.links[1].status == "unsupported_op"


def test_implement_x_to_unlock_n_counts_only_chains_that_are_x_alone() -> None:
    many = [m.model_copy(update={"architecture": f"Mixtral{i}"}) for i, m in enumerate([moe_chains()[1]] * 3)]
    got = rank([moe_chains()[0], *many])
    sort, gmm = got.blockers
    assert (sort.op, sort.architectures, sort.first, sort.unlocks) == (
        "aten::sort", ["JetMoe", "Mixtral0", "Mixtral1", "Mixtral2"], ["JetMoe", "Mixtral0", "Mixtral1", "Mixtral2"],
        ["JetMoe"])
    assert sort.message == "implement aten::sort to unlock 1 architecture(s) (in the chain of 4)"
    assert (gmm.op, gmm.first, gmm.unlocks) == ("aten::_grouped_mm", [], [])  # never alone: unlocks nothing alone
    assert [(u.ops, u.architectures) for u in got.unlock_sets] == [
        (["aten::sort", "aten::_grouped_mm"], ["Mixtral0", "Mixtral1", "Mixtral2"]), (["aten::sort"], ["JetMoe"])]
    assert got.unlock_sets[0].message == "implement aten::sort + aten::_grouped_mm to unlock 3 architecture(s)"
    assert got.measured and "chains measured" in got.note


def test_chains_end_at_a_failure_naming_no_op_no_verdict_stuck_or_the_cap() -> None:
    start = first_link(run("A", ("unsupported_op", SORT)))
    mismatch = rec("A", "forward", "mismatch", error=ErrorInfo(type="AssertionError", message="rmse"))
    failure = extend(start, [rec("A", "load"), mismatch, rec("A", "generate")])
    assert (failure.end, failure.detail) == (ChainEnd.FAILURE, "forward mismatch (AssertionError)")
    assert failure.text() == "aten::sort (Int) → forward mismatch (AssertionError)"
    no_verdict = extend(start, [rec("A", "load"), rec("A", "forward", "harness_error"), rec("A", "generate")])
    assert no_verdict.end == ChainEnd.NO_VERDICT and "forward harness_error" in no_verdict.detail
    stuck = extend(start, run("A", ("unsupported_op", "aten::sort (Long)")))
    assert stuck.end == ChainEnd.STUCK and stuck.ops == ["aten::sort"]
    chain = start
    for i in range(MAX_LINKS - 1):
        chain = extend(chain, run("A", ("unsupported_op", f"aten::op{i} (Float)")))
    assert chain.end == ChainEnd.CAPPED and len(chain.links) == MAX_LINKS
    got = rank([chain])
    assert got.capped == ["A"] and "capped" in got.note and got.unlock_sets == []
    assert all(b.unlocks == [] for b in got.blockers)  # measured, and none unlocks it: an empty list, not unknown


def test_the_first_link_is_the_one_rule_of_what_blocks() -> None:
    # The first failing support check in check order (load, forward, generate), whatever the record order.
    recs = [rec("A", "generate", "unsupported_op", HISTC), rec("A", "load"), rec("A", "forward", "unsupported_op", SORT)]
    assert first_link(recs).links == [Link(op=SORT, check="forward", status="unsupported_op")]
    # A failure naming no op comes first: the architecture is not failing at an op, so it has no chain.
    assert first_link([rec("B", "load"), rec("B", "forward", "mismatch"),
                       rec("B", "generate", "unsupported_op", HISTC)]) is None
    assert first_link(run("C")) is None


def test_a_report_uses_measured_chains_and_keeps_first_blockers_for_the_rest() -> None:
    records = [*run("JetMoe", ("unsupported_op", SORT)), *run("Mixtral", ("unsupported_op", SORT)),
               *run("Llama", ("unsupported_op", HISTC))]
    jet, mix = moe_chains()
    got = blocker_report(records, [jet, mix])
    assert {c.architecture: c.end for c in got.chains} == {
        "JetMoe": ChainEnd.PASS, "Mixtral": ChainEnd.PASS, "Llama": ChainEnd.UNKNOWN}
    assert not got.measured
    by_op = {b.op: b for b in got.blockers}
    assert by_op["aten::sort"].unlocks == ["JetMoe"] and by_op["aten::histc"].unlocks is None
