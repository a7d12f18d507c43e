"""The CLI's terminal tables: captions carry the coverage verdicts, notes in brackets are printed verbatim."""

from __future__ import annotations

from rich.console import Console

from compat.results import Check, ResultRecord, Status
from worker.orchestration.tables import coverage_table, results_table


def rec(arch: str, check: str, status: str = "pass", op: str | None = None, fallback=(), known=None):  # noqa: ANN001, ANN201
    return ResultRecord(architecture=arch, device="neuron", check=Check(check), status=Status(status),
                        blocking_op=op, fallback_ops=list(fallback), known_issue=known)


def support(arch: str, **over: str) -> list[ResultRecord]:
    return [rec(arch, c, over.get(c, "pass")) for c in ("load", "forward", "generate", "train")]


def test_coverage_table_caption_counts_each_verdict() -> None:
    fb = support("B")
    fb[2] = rec("B", "generate", fallback=["aten::cumsum (Long)"])
    recs = [*support("A"), *fb, *support("C", forward="unsupported_op")]
    recs[-3] = rec("C", "forward", "unsupported_op", "aten::histc (Long)", known="tracked upstream")
    table = coverage_table(recs)
    assert "1 supported natively, 1 with CPU fallback, 1 failing" in table.caption


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
