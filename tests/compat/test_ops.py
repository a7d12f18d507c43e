"""The one op spelling (compat.ops): ``format_op`` writes ``aten::x (Dtype, ...)`` through ``join_op`` and every
reader splits it with ``split_op``, so a spelled op always reads back as the name and dtypes it was written from."""

from __future__ import annotations

import torch

from compat.ops import join_op, op_dtypes, op_name, op_names, split_op
from worker.judge.attribution import format_op


def test_split_op_reads_back_what_format_op_wrote() -> None:
    text = format_op(torch.ops.aten._grouped_mm.default, [torch.float32, torch.int32])
    assert text == "aten::_grouped_mm (Float, Int)" == join_op("aten::_grouped_mm", ["Float", "Int"])
    assert split_op(text) == ("aten::_grouped_mm", ("Float", "Int"))
    assert (op_name(text), op_dtypes(text)) == ("aten::_grouped_mm", "Float, Int")
    assert split_op(format_op("aten::argmax")) == ("aten::argmax", ())  # no dtypes: the bare name
    assert op_dtypes("aten::argmax") == ""


def test_op_names_keeps_each_name_once_in_first_seen_order() -> None:
    assert op_names(["aten::isin (Long)", "aten::argmax (Float)", "aten::isin (Int)"]) == ["aten::isin",
                                                                                          "aten::argmax"]
