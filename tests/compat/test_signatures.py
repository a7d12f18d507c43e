"""Failure signatures (compat.signatures): new failures grouped by status, blocking op and normalised first line."""

from __future__ import annotations

from compat.signatures import EXAMPLES, Failure, group, normalise


def test_normalise_keeps_codes_and_drops_what_varies() -> None:
    line = normalise("NCC_EVRF013: sort of Int, shape [2, 16] at 0x7ffe12 in /tmp/compat-x/m.py:12\nTraceback ...")
    assert line == "NCC_EVRF013: sort of Int, shape [N, N] at 0x… in <path>:N"
    assert normalise("MixtralForCausalLM has float8_e4m3fn weights", "MixtralForCausalLM") == \
        "<arch> has float8_e4m3fn weights"
    assert normalise("\n\n  first  real   line \nsecond") == "first real line"
    assert normalise(None) == ""
    assert len(normalise("x" * 1000)) == 160


def test_group_counts_keys_names_examples_and_orders_by_count() -> None:
    sort = [Failure(f"Moe{i}ForCausalLM", check, "unsupported_op", "aten::sort (Int)",
                    f"NCC_EVRF013 in layer {i}") for i in range(5) for check in ("forward", "generate")]
    other = [Failure("LlamaForCausalLM", "train", "mismatch", None, "grads differ: max 0.25 > 0.01")]
    same_op_other_error = [Failure("Moe0ForCausalLM", "train", "unsupported_op", "aten::sort (Int)", "other text")]
    sigs = group(other + sort + same_op_other_error)
    assert [(s.status, s.op, s.error, s.count) for s in sigs] == [
        ("unsupported_op", "aten::sort (Int)", "NCC_EVRF013 in layer N", 10),
        ("mismatch", None, "grads differ: max N > N", 1),
        ("unsupported_op", "aten::sort (Int)", "other text", 1)]
    top = sigs[0]
    assert len(top.architectures) == 5 and top.examples == top.architectures[:EXAMPLES]
    assert top.checks == ["forward", "generate"]
    assert top.line().startswith("10 x unsupported_op [aten::sort (Int)] NCC_EVRF013 in layer N: 5 architecture(s) "
                                 "(Moe0ForCausalLM, Moe1ForCausalLM, Moe2ForCausalLM and 2 more)")
    assert top.as_dict()["examples"] == top.examples
