"""Which re-runs the decisions phase needs (compat/decision_work.py): only architectures whose support checks' ops a
re-run switch decides, each re-run once, a combination re-run only where two of its re-run switches meet."""

from __future__ import annotations

from compat.decision_work import Need, cannot_move, distinct_reruns, needs, support_ops
from compat.results import ResultRecord

SORT = {"id": "sort", "ops": ["aten::sort"], "dtypes": ["Int", "Long"], "measure": "rerun", "other_option": "permissive"}
GMM = {"id": "gmm", "ops": ["aten::_grouped_mm"], "dtypes": [], "measure": "rerun", "other_option": "permissive"}
SCATTER = {"id": "scatter", "ops": ["aten::embedding_dense_backward", "aten::index_add"], "dtypes": ["Long"],
           "measure": "rerun", "other_option": "strict"}
ARGMAX = {"id": "argmax", "ops": ["aten::argmax"], "dtypes": [], "measure": "traces", "other_option": "permissive"}
SWITCHES = {sw["id"]: sw for sw in (SORT, GMM, SCATTER, ARGMAX)}
PERMISSIVE = {"sort": "runs", "gmm": "off", "argmax": "native"}

FWD_GEN = {"Moe": ["aten::mm (Float)", "aten::sort (Int)", "aten::_grouped_mm (Float, Int)", "aten::argmax (Float)"],
           "Dense": ["aten::mm (Float)", "aten::argmax (Float)"],
           "SortOnly": ["aten::sort (Long)", "aten::argmax (Float)"]}
TRAIN = ["aten::embedding_dense_backward (Float, Long)"]  # every model's train step: integer indices
TRACES = {a: [*ops, *TRAIN] for a, ops in FWD_GEN.items()}


def _rec(arch: str, check: str, status: str = "pass", fallback: list[str] | None = None,
         op: str | None = None) -> ResultRecord:
    return ResultRecord(architecture=arch, device="neuron", check=check, status=status, fallback_ops=fallback or [],
                        blocking_op=op)


RECORDS = [_rec(a, c) for a in FWD_GEN for c in ("load", "forward", "generate")]


def _work(plans, support=FWD_GEN, records=RECORDS, measurable=tuple(FWD_GEN)):
    return {",".join(sorted(w.plan)): w for w in needs(plans, SWITCHES, TRACES, support, records, measurable)}


def test_a_switch_only_train_runs_is_looked_at_but_never_re_run():
    (w,) = _work([{"scatter": "fails"}]).values()
    # Looked at as before (its trace holds the op: the stored effect's "affected" list is unchanged) ...
    assert w.looked == ["Dense", "Moe", "SortOnly"] and w.measured_by == "rerun"
    # ... but no support check runs embedding_dense_backward: nothing to re-run, the stored verdicts stand.
    assert w.reruns == {}


def test_without_recorded_support_ops_the_whole_trace_counts():
    # A trace read back from the store (ops only) or a sweep whose generate did not run its reference: conservative.
    (w,) = _work([{"scatter": "fails"}], support={"Moe": None, "Dense": FWD_GEN["Dense"]}).values()
    assert sorted(w.reruns) == ["Moe", "SortOnly"]
    assert w.reruns["Moe"] == Need("Moe", (("scatter", "fails"),))


def test_a_support_record_op_counts_even_when_the_trace_lacks_it():
    # The device ran index_add on Long in forward (on the CPU fallback) though the CPU reference never did: the
    # record says so.
    records = [r for r in RECORDS if (r.architecture, r.check) != ("Dense", "forward")]
    records.append(_rec("Dense", "forward", fallback=["aten::index_add (Float, Long, Float)"]))
    (w,) = _work([{"scatter": "fails"}], records=records).values()
    assert list(w.reruns) == ["Dense"]
    assert "aten::index_add (Float, Long, Float)" in support_ops("Dense", TRACES, FWD_GEN, records)


def test_a_combination_re_runs_only_where_two_of_its_re_run_switches_meet():
    plans = [{"sort": "runs"}, {"gmm": "off"}, {"argmax": "native"}, PERMISSIVE]
    work = _work(plans)
    assert sorted(work["sort"].reruns) == ["Moe", "SortOnly"] and list(work["gmm"].reruns) == ["Moe"]
    assert work["argmax"].reruns == {} and work["argmax"].measured_by == "traces"
    both = work["argmax,gmm,sort"]
    assert both.looked == ["Dense", "Moe", "SortOnly"] and both.traces_switches == ["argmax"]
    # SortOnly: only sort touches it, so the combination reads sort's own re-run (argmax is re-judged on top).
    assert both.reruns["SortOnly"] is not None and both.reruns["SortOnly"] == work["sort"].reruns["SortOnly"]
    # Moe: sort and _grouped_mm both touch it (a failure behind another): a re-run of its own with both set.
    assert both.reruns["Moe"] == Need("Moe", (("gmm", "off"), ("sort", "runs")))
    assert "Dense" not in both.reruns  # only argmax touches it: its stored records, re-judged
    # Each re-run once: sort's two, _grouped_mm's one, the combination's one for the MoE.
    assert distinct_reruns(work.values()) == [Need("Moe", (("gmm", "off"),)),
                                              Need("Moe", (("gmm", "off"), ("sort", "runs"))),
                                              Need("Moe", (("sort", "runs"),)),
                                              Need("SortOnly", (("sort", "runs"),))]


def test_architectures_a_re_run_may_not_run_are_not_looked_at():
    (w,) = _work([{"sort": "runs"}], measurable=["SortOnly"]).values()
    assert w.looked == ["SortOnly"] and list(w.reruns) == ["SortOnly"]


def test_a_strict_switch_cannot_move_an_architecture_already_failing_nor_any_switch_one_the_device_never_ran():
    moe_fails = [_rec("Moe", "load"), _rec("Moe", "forward", "unsupported_op", op="aten::sort (Int)"),
                 _rec("Moe", "generate", "unsupported_op", op="aten::sort (Int)")]
    passing = [_rec("Dense", c) for c in ("load", "forward", "generate")]
    # A strict option only makes ops fail that ran: the first failure stays, or an earlier one comes.
    assert cannot_move([SCATTER], moe_fails) and not cannot_move([SCATTER], passing)
    # A permissive one may let the failing op run (the MoE's sort): it is re-run.
    assert not cannot_move([SORT], moe_fails) and not cannot_move([SORT, SCATTER], moe_fails)
    # The CPU reference failed before the load check (the first support check): the device ran nothing.
    never = [_rec("Odd", c, "reference_fail") for c in ("load", "forward", "generate")]
    assert cannot_move([SORT], never) and not cannot_move([SORT], [_rec("Odd", "load"), *never[1:]])
    # In a plan: index_add (Long) in the MoE's forward touches the strict switch, but the MoE already fails.
    records = [r for r in RECORDS if r.architecture != "Moe"] + moe_fails
    support = {**FWD_GEN, "Moe": [*FWD_GEN["Moe"], "aten::index_add (Float, Long, Float)"]}
    (w,) = _work([{"scatter": "fails"}], support=support, records=records).values()
    assert w.reruns == {}


def test_a_permissive_switch_cannot_move_an_architecture_refused_at_an_op_it_does_not_name():
    # The MoE is refused at integer sort in forward and generate: letting _grouped_mm run (it comes after) leaves
    # both refusals where they are, so only sort alone and sort with _grouped_mm are re-run for it.
    moe_fails = [_rec("Moe", "load"), _rec("Moe", "forward", "unsupported_op", op="aten::sort (Int)"),
                 _rec("Moe", "generate", "unsupported_op", op="aten::sort (Int)")]
    assert cannot_move([GMM], moe_fails)
    assert not cannot_move([SORT], moe_fails) and not cannot_move([GMM, SORT], moe_fails)
    # One refusal at an op the switch does not name is enough: that check keeps failing, and so does the
    # architecture (here either switch alone leaves one of the two refusals standing; both together may not).
    mixed = [*moe_fails[:2], _rec("Moe", "generate", "unsupported_op", op="aten::_grouped_mm (Float, Int)")]
    assert cannot_move([GMM], mixed) and cannot_move([SORT], mixed) and not cannot_move([GMM, SORT], mixed)
    # Not provable, so re-run: a failure that names no op (numerics), one of the switch's ops on the CPU fallback
    # before the refusal (the option may run it on the device instead), a switch that names no ops, a mixed set.
    mismatch = [_rec("Moe", "load"), _rec("Moe", "forward", "mismatch"), _rec("Moe", "generate", "error")]
    assert not cannot_move([GMM], mismatch)
    behind = [_rec("Moe", "load"), _rec("Moe", "forward", "unsupported_op", op="aten::sort (Int)",
                                        fallback=["aten::_grouped_mm (Float, Int)"])]
    assert not cannot_move([GMM], behind)
    assert not cannot_move([{**GMM, "ops": []}], moe_fails) and not cannot_move([GMM, SCATTER], moe_fails)
    # In a plan: _grouped_mm alone needs no re-run of the refused MoE; the permissive combination still does.
    records = [r for r in RECORDS if r.architecture != "Moe"] + moe_fails
    work = _work([{"gmm": "off"}, PERMISSIVE], records=records)
    assert work["gmm"].reruns == {} and work["gmm"].looked == ["Moe"]
    assert work["argmax,gmm,sort"].reruns["Moe"] == Need("Moe", (("gmm", "off"), ("sort", "runs")))
