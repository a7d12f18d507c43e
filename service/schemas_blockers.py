"""The API's schemas of ``GET /blockers`` and ``compat blockers``: ops ranked by what they block, chains, unlock sets.

``service.blockers`` fills them from ``compat.chains`` and ``compat.coverage``; the API, the CLI and the pages read them.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Blocker(BaseModel):
    """``compat.chains.Blocker``: an op in the blocker chains, the architectures it blocks and unlocks."""

    op: str
    count: int  # architectures whose chain holds it
    architectures: list[str]  # by rank
    first: list[str] = Field(default_factory=list)  # it is their first blocker
    # whole chain is {op} and ends in a pass; null = unknown (only first blockers known on this device or run)
    unlocks: list[str] | None = Field(default_factory=list)
    variants: list[str] = Field(default_factory=list)  # e.g. "aten::histc (Long)"
    checks: list[str] = Field(default_factory=list)
    best_rank: int | None = None
    message: str = ""  # "implement aten::x to unlock N architecture(s) ...", the CLI's sentence


class ChainLink(BaseModel):
    op: str  # e.g. "aten::sort (Int)"
    check: str
    status: str


class ChainOut(BaseModel):
    """``compat.chains.Chain``: one architecture's blockers in the order the device meets them, and how it ends."""

    architecture: str
    device: str
    rank: int | None = None
    links: list[ChainLink]
    ops: list[str]  # op names, in order
    end: str  # pass | failure | no_verdict | stuck | capped | unknown (only the first blocker is known)
    detail: str = ""
    text: str  # "aten::sort (Int) → aten::_grouped_mm (Float, Int) → pass"


class UnlockSetOut(BaseModel):
    """``compat.chains.UnlockSet``: ops that together unlock the architectures whose whole chain they are."""

    ops: list[str]
    count: int
    architectures: list[str]
    message: str


class FallbackOp(BaseModel):
    """``compat.coverage.fallback_ranking``: an op supported architectures ran on the CPU fallback."""

    op: str
    count: int  # architectures that ran it on the CPU
    architectures: list[str]
    offloads: list[str] = Field(default_factory=list)  # its only fallback op: implemented, they become native


class Blockers(BaseModel):
    device: str | None
    run_id: str | None
    items: list[Blocker]
    fallback: list[FallbackOp] = Field(default_factory=list)
    unlock_sets: list[UnlockSetOut] = Field(default_factory=list)  # "sort + _grouped_mm unlock 51"
    chains: list[ChainOut] = Field(default_factory=list)  # a chain per blocked architecture, by rank
    measured: bool = False  # chains measured (else only the first blocker is known)
    note: str = ""  # what the chains are and how far they are known, in words (compat.chains.BlockerReport.note)
