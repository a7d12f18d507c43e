"""The one table of per-check facts (compat/checks.py): every per-check list the harness reads is derived from it.

The lists keep the values they had when they were written by hand in five places (issue 31 item 2).
"""

from __future__ import annotations

from compat import checks as ck
from compat.checks import CHECK_TABLE, Check, CheckKind
from worker.judge import calibration
from worker.run.checks import checks as run_checks


def test_every_check_has_one_row_and_a_run_place() -> None:
    assert [f.check for f in CHECK_TABLE] == list(ck.ALL_CHECKS)
    assert set(ck.ALL_CHECKS) == set(Check)
    assert sorted(f.run_at for f in CHECK_TABLE) == list(range(len(Check)))


def test_the_derived_lists_keep_their_hand_written_values() -> None:
    assert ck.ALL_CHECKS == ("load", "forward", "generate", "train", "compile", "lora", "sft", "fsdp", "tp")
    # train mutates the weights: it runs after compile, which reuses the loaded model.
    assert ck.RUN_ORDER == ("load", "forward", "generate", "compile", "train", "lora", "sft", "fsdp", "tp")
    assert ck.DEFAULT_CHECKS == ("load", "forward", "generate", "train")
    assert ck.FINETUNE_CHECKS == ("lora", "sft", "fsdp", "tp")
    assert ck.DISTRIBUTED_CHECKS == ("fsdp", "tp")
    assert ck.NIGHTLY_CHECKS == ("load", "forward", "generate", "train", "lora", "sft", "fsdp", "tp")
    assert ck.SUPPORT_CHECKS == ("load", "forward", "generate")
    assert ck.USES_LOADED_MODEL == {"forward", "generate", "compile", "train"}
    assert ck.CACHED_PART == {"forward": "forward", "generate": "generate", "train": "train", "lora": "lora",
                              "sft": "sft"}
    assert ck.WORK_CHECKS == {("prefill_forward", "eager"): "forward", ("generate", "eager"): "generate",
                              ("train", "eager"): "train", ("prefill_forward", "compile"): "compile"}
    assert ck.HEADLINE_LABELS == {"lora": "fine-tunes with LoRA"}
    assert ck.CHECK_ORDER == {str(c): i for i, c in enumerate(ck.ALL_CHECKS)}


def test_the_readers_use_the_table() -> None:
    assert run_checks.RUN_ORDER is ck.RUN_ORDER
    assert calibration.WORK_CHECKS is ck.WORK_CHECKS
    # Each in-process check has its work; the distributed ones run in a rank group instead.
    assert set(run_checks.CHECKS) == {f.check for f in CHECK_TABLE if f.kind != CheckKind.DISTRIBUTED}
