"""The one-line verdict of an architecture (compat/verdict_text.py): native, fallback ops per check, blocking op."""

from __future__ import annotations

from compat.results import ErrorInfo, ResultRecord
from compat.verdict_text import verdict_text


def _r(check: str, status: str = "pass", fallback: list[str] | None = None, op: str | None = None,
       **kw: object) -> ResultRecord:
    return ResultRecord(architecture="X", device="neuron", check=check, status=status, fallback_ops=fallback or [],
                        blocking_op=op, **kw)


def test_native_fallback_and_failing_lines():
    assert verdict_text([_r("load"), _r("forward"), _r("generate"), _r("train", fallback=["aten::x (Float)"])]) == \
        "supported natively"  # train is not a support check
    assert verdict_text([_r("load"), _r("forward", fallback=["aten::isin (Long)", "aten::isin (Int)"]),
                         _r("generate", fallback=["aten::argmax (Float)"])]) == \
        "supported with CPU fallback: forward aten::isin; generate aten::argmax"
    assert verdict_text([_r("load"), _r("forward", "unsupported_op", op="aten::sort (Int)"),
                         _r("generate", "unsupported_op", op="aten::sort (Int)")]) == \
        "failing: forward unsupported_op at aten::sort (Int)"
    assert verdict_text([_r("load"), _r("forward", "error", error=ErrorInfo(type="ValueError", message="m")),
                         _r("generate")]) == "failing: forward error: ValueError"
    assert verdict_text([_r("load", "reference_fail", reason="the CPU reference disagrees with itself"),
                         _r("forward", "reference_fail", reason="the CPU reference disagrees with itself"),
                         _r("generate", "reference_fail", reason="the CPU reference disagrees with itself")]) == \
        "reference fail: the CPU reference disagrees with itself"
