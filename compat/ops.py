"""The one spelling of an op with its input dtypes, ``aten::sort (Int, Long)``: written by ``join_op`` (the
harness's ``format_op`` spells through it) and read back by ``split_op``, so no reader parses the text itself.
"""

from __future__ import annotations

from collections.abc import Iterable


def join_op(name: str, dtypes: Iterable[str] = ()) -> str:
    """``("aten::histc", ["Long"])`` -> ``aten::histc (Long)``; no dtypes -> the bare name."""
    dtypes = list(dtypes)
    return f"{name} ({', '.join(dtypes)})" if dtypes else name


def split_op(text: str) -> tuple[str, tuple[str, ...]]:
    """``aten::sort (Int, Long)`` -> ``("aten::sort", ("Int", "Long"))``; a bare name has no dtypes."""
    name, sep, rest = text.partition(" (")
    if not sep:
        return text, ()
    return name, tuple(d.strip() for d in rest.rstrip(")").split(",") if d.strip())


def op_name(text: str) -> str:
    """``aten::sort (Int)`` -> ``aten::sort``: the op without its dtypes (what blockers are ranked by)."""
    return split_op(text)[0]


def op_dtypes(text: str) -> str:
    """``aten::sort (Int, Long)`` -> ``Int, Long``: the dtypes as spelled, empty for a bare name."""
    return ", ".join(split_op(text)[1])


def op_names(ops: Iterable[str]) -> list[str]:
    """Each op's name once, first seen first: ``["aten::isin (Long)", "aten::isin (Int)"]`` -> ``["aten::isin"]``."""
    return list(dict.fromkeys(op_name(op) for op in ops))
