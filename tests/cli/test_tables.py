"""The CLI's terminal tables: captions carry the coverage verdicts, notes in brackets are printed verbatim, and
every table is readable at 80 and 120 columns (op names, statuses and checks whole, no line too wide)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from cli.tables import blockers_table, coverage_table, results_table
from compat.chains import blocker_report
from compat.ops import op_name
from compat.results import Check, ErrorInfo, ResultRecord, Status


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
    assert "[known issue 1]" in text and "known issue 1: MoE histc on ints" in text  # the text once, under the table
    assert "[fallback: aten::_is_all_true (Bool)]" in text
    assert "unsupported_dtype" in text and "aten::histc (Int)" in text


# -- readable at 80 columns: op names, statuses and checks whole, no line wider than the terminal -----------------

LONG_OP = "aten::_scaled_dot_product_efficient_attention (BFloat16, BFloat16, BFloat16, Float)"


def failing_run() -> list[ResultRecord]:
    """Every status at least once, long op names with dtypes, long error text, known issues and fallbacks."""
    out = []
    for i, status in enumerate(Status):
        for check in Check:
            op = LONG_OP if status == Status.UNSUPPORTED_OP else (
                "aten::_foreach_addcdiv_ (Float, Float, Float, Float)" if status == Status.MISMATCH else None)
            out.append(ResultRecord(
                architecture=f"Arch{i}VeryLongModelNameForCausalLM", device="neuron", check=check, status=status,
                blocking_op=op, duration_s=123.456,
                error=ErrorInfo(type="NeuronUnsupportedOpError",
                                message=f"{op or 'it'} is not supported on neuron: the compiler rejects this "
                                        "operator for the given dtypes (see the Neuron docs)")
                if status != Status.PASS else None,
                known_issue="tracked upstream as a compiler limitation" if status == Status.MISMATCH else None,
                fallback_ops=["aten::_is_all_true (Bool)"] if status == Status.PASS else []))
    return out


def render(renderable, width: int) -> list[str]:  # noqa: ANN001 - any rich renderable
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable, crop=False)  # too wide must show as too wide, not be cut to fit
    return console.export_text().splitlines()


def assert_readable(lines: list[str], width: int, whole: set[str]) -> None:
    too_wide = [ln for ln in lines if len(ln) > width]
    assert too_wide == [], "\n".join(too_wide)
    broken = [w for w in whole if not any(w in ln for ln in lines)]
    assert broken == [], ("\n".join(lines), broken)
    assert not any("…" in ln for ln in lines), "\n".join(lines)


@pytest.mark.parametrize("width", [80, 120])
def test_coverage_table_keeps_every_status_and_check_whole(width: int) -> None:
    lines = render(coverage_table(failing_run(), title="coverage on neuron (bundled simulation)"), width)
    assert_readable(lines, width, {str(s) for s in Status} | {str(c) for c in Check})


@pytest.mark.parametrize("width", [80, 120, 200])
def test_results_table_keeps_status_op_and_check_whole(width: int) -> None:
    recs = [r for r in failing_run() if r.check in (Check.LOAD, Check.FORWARD)][:12]
    recs += [r.model_copy(update={"device": "cpu"}) for r in recs[:3]]
    lines = render(results_table(recs, title="Arch"), width)
    whole = {str(r.status) for r in recs} | {str(r.check) for r in recs} | {op_name(LONG_OP)}
    assert_readable(lines, width, whole)
    # Free text wraps, nothing of it is lost (word by word: in one row per check it wraps inside its column).
    words = set(" ".join(lines).split())
    assert set("the compiler rejects this operator for the given dtypes [known issue 1] tracked upstream".split()) <= words


@pytest.mark.parametrize("width", [80, 120, 200])
def test_blockers_table_keeps_every_op_whole(width: int) -> None:
    ranked = blocker_report(failing_run()).blockers
    assert {b.op for b in ranked} == {op_name(LONG_OP), "aten::_foreach_addcdiv_"}
    lines = render(blockers_table(ranked), width)
    assert_readable(lines, width, {b.op for b in ranked})


def test_a_wide_terminal_gets_one_row_per_check() -> None:
    recs = [rec("M", "forward", "unsupported_dtype", op="aten::histc (Int)"), rec("M", "load")]
    wide = render(results_table(recs, title="M"), 160)
    row = next(ln for ln in wide if "unsupported_dtype" in ln)
    assert "forward" in row and "aten::histc (Int)" in row  # status, check and op on one line
    narrow = render(results_table(recs, title="M"), 60)
    assert any("unsupported_dtype" in ln for ln in narrow) and any("op: aten::histc (Int)" in ln for ln in narrow)
