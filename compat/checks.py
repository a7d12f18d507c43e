"""The checks and, for each, one row of facts: where it is listed and run, its kind, whether it uses the loaded model,
which cached CPU reference part it reads, which observed real-hardware work it matches, and its headline.

Every per-check list of the harness (``ALL_CHECKS``, ``RUN_ORDER``, ``DEFAULT_CHECKS``, ``CACHED_PART``,
``WORK_CHECKS``, ``HEADLINE_LABELS``...) is derived here from ``CHECK_TABLE``; adding a check is one row.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Check(StrEnum):
    LOAD = "load"
    FORWARD = "forward"
    GENERATE = "generate"
    TRAIN = "train"
    COMPILE = "compile"
    LORA = "lora"  # peft LoRA on the attention projections, one AdamW step
    SFT = "sft"  # trl SFTTrainer, two steps
    FSDP = "fsdp"  # FSDP2 fully_shard over 2 ranks, one step
    TP = "tp"  # Transformers' tp_plan="auto" over 2 ranks, forward


class CheckKind(StrEnum):
    """Which selection a check belongs to and where it runs."""

    DEFAULT = "default"  # run unless asked otherwise, in the architecture's process
    OPT_IN = "opt_in"  # compile: it costs far more than the default four together
    FINETUNE = "finetune"  # fine-tuning in the architecture's process, on a model of its own (issue 14)
    DISTRIBUTED = "distributed"  # fine-tuning in a 2-rank process group (worker/run/ranks/group.py), not in the process


@dataclass(frozen=True)
class CheckFacts:
    check: Check
    run_at: int  # place in the order the checks run (RUN_ORDER); the table's own order is the listing order
    kind: CheckKind
    support: bool = False  # an architecture is *supported* on a device when every support check passes
    uses_loaded_model: bool = False  # runs on the model the load check put on the device (skipped when it failed)
    cached_part: str | None = None  # the reference-cache part it consumes (its hit/miss goes on the record)
    observed_as: tuple[tuple[str, str], ...] = ()  # observed (work, mode) of real hardware this check does too
    headline: str | None = None  # the headline's own wording for this check, if it has one


# The listing order (tables, columns, the first failing check). Run order (``run_at``): train mutates the weights,
# so it runs last of those sharing the loaded model; compile reuses it before that. The fine-tuning checks load their
# own models (lora, sft) or run in a rank group (fsdp, tp). Observed work (judge/calibration.py): real runs are
# eager prefill forwards (one model(ids) call), which the forward check runs; generate/train have their own checks,
# and a compiled prefill is the compile check (forward parity under torch.compile).
CHECK_TABLE: tuple[CheckFacts, ...] = (
    CheckFacts(Check.LOAD, 0, CheckKind.DEFAULT, support=True),
    CheckFacts(Check.FORWARD, 1, CheckKind.DEFAULT, support=True, uses_loaded_model=True, cached_part="forward",
               observed_as=(("prefill_forward", "eager"),)),
    CheckFacts(Check.GENERATE, 2, CheckKind.DEFAULT, support=True, uses_loaded_model=True, cached_part="generate",
               observed_as=(("generate", "eager"),)),
    CheckFacts(Check.TRAIN, 4, CheckKind.DEFAULT, uses_loaded_model=True, cached_part="train",
               observed_as=(("train", "eager"),)),
    CheckFacts(Check.COMPILE, 3, CheckKind.OPT_IN, uses_loaded_model=True,
               observed_as=(("prefill_forward", "compile"),)),
    CheckFacts(Check.LORA, 5, CheckKind.FINETUNE, cached_part="lora", headline="fine-tunes with LoRA"),
    CheckFacts(Check.SFT, 6, CheckKind.FINETUNE, cached_part="sft"),
    CheckFacts(Check.FSDP, 7, CheckKind.DISTRIBUTED),
    CheckFacts(Check.TP, 8, CheckKind.DISTRIBUTED),
)
FACTS: dict[Check, CheckFacts] = {f.check: f for f in CHECK_TABLE}

ALL_CHECKS: tuple[Check, ...] = tuple(f.check for f in CHECK_TABLE)
RUN_ORDER: tuple[Check, ...] = tuple(f.check for f in sorted(CHECK_TABLE, key=lambda f: f.run_at))
DEFAULT_CHECKS: tuple[Check, ...] = tuple(f.check for f in CHECK_TABLE if f.kind == CheckKind.DEFAULT)
DISTRIBUTED_CHECKS: tuple[Check, ...] = tuple(f.check for f in CHECK_TABLE if f.kind == CheckKind.DISTRIBUTED)
FINETUNE_CHECKS: tuple[Check, ...] = tuple(
    f.check for f in CHECK_TABLE if f.kind in (CheckKind.FINETUNE, CheckKind.DISTRIBUTED))
# The nightly sweep: the default checks plus the fine-tuning ones (compile stays opt-in).
NIGHTLY_CHECKS: tuple[Check, ...] = (*DEFAULT_CHECKS, *FINETUNE_CHECKS)
SUPPORT_CHECKS: tuple[Check, ...] = tuple(f.check for f in CHECK_TABLE if f.support)
USES_LOADED_MODEL: frozenset[Check] = frozenset(f.check for f in CHECK_TABLE if f.uses_loaded_model)
CACHED_PART: dict[Check, str] = {f.check: f.cached_part for f in CHECK_TABLE if f.cached_part}
WORK_CHECKS: dict[tuple[str, str], Check] = {wm: f.check for f in CHECK_TABLE for wm in f.observed_as}
HEADLINE_LABELS: dict[Check, str] = {f.check: f.headline for f in CHECK_TABLE if f.headline}
# A check's place in ALL_CHECKS: what orders checks wherever they are listed or the first failing one is chosen.
CHECK_ORDER: dict[str, int] = {str(c): i for i, c in enumerate(ALL_CHECKS)}

if set(FACTS) != set(Check) or len(FACTS) != len(CHECK_TABLE) or sorted(f.run_at for f in CHECK_TABLE) != list(
        range(len(CHECK_TABLE))):
    raise AssertionError("CHECK_TABLE: one row per check, run_at a permutation of 0..n-1")
