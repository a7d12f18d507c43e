"""Known issues: the shipped file parses, and only failures it describes are marked as known."""

from __future__ import annotations

from compat.results import Check, ResultRecord, Status
from worker.judge.known_issues import annotate, load_known_issues


def rec(arch: str, check: str, status: str = "pass", op: str | None = None, fallback=(), known=None):  # noqa: ANN001, ANN201
    return ResultRecord(architecture=arch, device="neuron", check=Check(check), status=Status(status),
                        blocking_op=op, fallback_ops=list(fallback), known_issue=known)


def test_known_issues_mark_matching_failures_only() -> None:
    issues = load_known_issues()  # the shipped file must parse
    recs = [rec("Qwen3MoeForCausalLM", "forward", "unsupported_dtype", "aten::histc (Int)"),
            rec("Qwen3MoeForCausalLM", "forward", "unsupported_op", "aten::cumsum (Long)"),
            rec("LlamaForCausalLM", "forward", "pass")]
    out = annotate(recs, issues)
    assert out[0].known_issue and "histc" in out[0].known_issue
    assert out[1].known_issue is None and out[2].known_issue is None
    on_cpu = recs[0].model_copy(update={"device": "cpu"})
    assert annotate([on_cpu], issues)[0].known_issue is None  # the histc entry is for neuron only


