"""The headline's uncertainty: how many architectures each of the device's decision switches moves, and the range the
headline spans across them. Pure rules over stored verdicts; every reader (CLI, API, pages) formats the range here.

A switch is a decision the simulated device models one way while another reading of the evidence is possible (its
options and sources live in the device profile). A run measures each one (worker/orchestration/decisions.py): the
architectures it can touch are run again with the other option (``rerun``), or, when it only moves an op between the
device and the CPU fallback, re-judged from the stored fallback ops (``traces``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from compat.ops import split_op
from compat.results import SUPPORT_CHECKS, ResultRecord, arch_verdict, by_architecture, percent

SUPPORTED_VERDICTS = frozenset({"supported", "supported_with_fallback"})


class DecisionEffect(BaseModel):
    """What setting one switch (or several, ``switches``) to another option does to one run's verdicts."""

    switches: dict[str, str]  # switch id -> the option measured (not the default)
    subject: str  # e.g. "`_grouped_mm` 128-alignment and bf16-only"
    confidence: str  # the switch's confidence ("low", "medium"); a combination takes the lowest
    sources: list[str] = Field(default_factory=list)  # refs (URL, or repo + path + commit) of the option measured
    measured_by: str  # "rerun" | "traces"
    affected: list[str] = Field(default_factory=list)  # architectures looked at (the rest cannot move)
    verdicts: dict[str, str] = Field(default_factory=dict)  # architecture -> its verdict under the option
    gains: list[str] = Field(default_factory=list)  # become supported
    losses: list[str] = Field(default_factory=list)  # stop being supported
    native_gains: list[str] = Field(default_factory=list)
    native_losses: list[str] = Field(default_factory=list)
    unmeasured: list[str] = Field(default_factory=list)  # affected, but the re-run gave no verdict (harness, crash)

    @property
    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.switches.items()))

    @property
    def moves(self) -> int:
        """Net change of the supported count."""
        return len(self.gains) - len(self.losses)

    @property
    def native_moves(self) -> int:
        return len(self.native_gains) - len(self.native_losses)


def touches(switch: Mapping, ops: Iterable[str]) -> bool:
    """Whether an architecture's ops (``"aten::sort (Long)"``, from its op trace or records) include one the switch
    decides: one of its ops (with one of its dtypes when it names dtypes), or, for a dtype-only switch, any op on
    one of its dtypes."""
    names, dtypes = set(switch.get("ops", [])), set(switch.get("dtypes", []))
    for text in ops:
        op, spelled = split_op(text)
        op_dtypes = set(spelled)
        if names and op not in names:
            continue
        if dtypes and not (op_dtypes & dtypes):
            continue
        if names or dtypes:
            return True
    return False


def affected(switch: Mapping, traces: Mapping[str, Sequence[str]], records: Iterable[ResultRecord]) -> list[str]:
    """Architectures a switch can move: their CPU op trace or a support-check record (blocking op, CPU fallback
    ops) touches it. Sorted, so a measurement is reproducible."""
    seen: dict[str, list[str]] = {arch: list(ops) for arch, ops in traces.items()}
    for r in records:
        if r.check in SUPPORT_CHECKS:
            seen.setdefault(r.architecture, []).extend([*r.fallback_ops, *([r.blocking_op] if r.blocking_op else [])])
    return sorted(arch for arch, ops in seen.items() if touches(switch, ops))


def _native(verdict: str) -> bool:
    return verdict == "supported"


def effect_of(switches: Mapping[str, str], subject: str, confidence: str, sources: Sequence[str], measured_by: str,
              base: Mapping[str, str], under: Mapping[str, str], looked_at: Sequence[str]) -> DecisionEffect:
    """Compare each looked-at architecture's stored verdict (``base``) with its verdict under the option
    (``under``). An architecture whose re-run gave no verdict either way (not_judged) is listed as unmeasured."""
    eff = DecisionEffect(switches=dict(switches), subject=subject, confidence=confidence, sources=list(sources),
                         measured_by=measured_by, affected=list(looked_at))
    for arch in looked_at:
        before, after = base.get(arch, "not_judged"), under.get(arch, "not_judged")
        eff.verdicts[arch] = after
        if after == "not_judged" and before != "not_judged":
            eff.unmeasured.append(arch)
            continue
        if (before in SUPPORTED_VERDICTS) != (after in SUPPORTED_VERDICTS):
            (eff.gains if after in SUPPORTED_VERDICTS else eff.losses).append(arch)
        if _native(before) != _native(after):
            (eff.native_gains if _native(after) else eff.native_losses).append(arch)
    return eff


def rejudge_fallback(switches: Sequence[Mapping], records: Iterable[ResultRecord]) -> dict[str, str]:
    """Verdicts when the switches' ops run on the device instead of the CPU fallback, from stored records alone: a
    support-check fallback op a switch decides is dropped. Valid only for switches that move ops between the device
    and the fallback (measure "traces"): a failure stopped at an op cannot be re-judged this way."""
    out = {}
    for arch, recs in by_architecture(records).items():
        moved = [r.model_copy(update={"fallback_ops": [op for op in r.fallback_ops
                                                       if not any(touches(sw, [op]) for sw in switches)]})
                 for r in recs]
        out[arch] = arch_verdict(moved)
    return out


def restrict(effect: DecisionEffect, names: Iterable[str]) -> DecisionEffect:
    """The effect over a subset of the run's architectures (a top-N view counts only its own)."""
    keep = set(names)
    return effect.model_copy(update={
        f: [a for a in getattr(effect, f) if a in keep]
        for f in ("affected", "gains", "losses", "native_gains", "native_losses", "unmeasured")
    } | {"verdicts": {a: v for a, v in effect.verdicts.items() if a in keep}})


@dataclass(frozen=True)
class HeadlineRange:
    """The headline with its range across the measured decisions, one spelling for every reader."""

    supported: int
    total: int
    low: int
    high: int
    singles: tuple[DecisionEffect, ...]  # one switch each
    together: tuple[DecisionEffect, ...]  # several switches at once (the range's ends when interactions matter)

    def text(self) -> str:
        head = f"{self.supported} ({percent(self.supported, self.total)}) out of the box"
        if not self.singles:
            return head
        parts = []
        for e in self.singles:
            part = f"{e.subject} ({e.confidence}) moves {_signed(e.moves)}"
            if e.native_moves:
                part += f", native {_signed(e.native_moves)}"
            parts.append(part)
        for e in self.together:
            parts.append(f"{' + '.join(sorted(e.switches))} together move {_signed(e.moves)}")
        return (f"{head}; {self.low}–{self.high} across {len(self.singles)} decision(s): " + "; ".join(parts))


def _signed(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)


def headline_range(supported: int, total: int, effects: Iterable[DecisionEffect]) -> HeadlineRange:
    """The range the headline spans: from the most losses to the most gains any measured setting gives (a single
    switch, or a measured combination). Unmeasured combinations are not guessed."""
    effects = list(effects)
    singles = tuple(e for e in effects if len(e.switches) == 1)
    together = tuple(e for e in effects if len(e.switches) > 1)
    moves = [e.moves for e in effects]
    return HeadlineRange(supported, total, supported + min([0, *moves]), supported + max([0, *moves]), singles,
                         together)


def whatif(chosen: Mapping[str, str], supported: int, total: int, effects: Iterable[DecisionEffect]
           ) -> tuple[DecisionEffect | None, str]:
    """Re-judge a run under ``chosen`` switch options from what it measured: the effect whose switches are exactly
    ``chosen`` (a single switch, or a measured combination), with the headline it gives; or None and why not. A
    combination nobody ran is never guessed from its parts (a failure behind another moves only with both)."""
    effects = list(effects)
    found = next((e for e in effects if e.switches == dict(chosen)), None)
    if found is None:
        measured = "; ".join(e.key for e in effects) or "none (the run measured no decisions)"
        flags = " ".join(f"--switch {k}={v}" for k, v in sorted(chosen.items()))
        return None, (f"not measured: {', '.join(f'{k}={v}' for k, v in sorted(chosen.items()))} was not run with "
                      f"this run's architectures, and stored traces re-judge only a fallback, never a failure that "
                      f"stopped at an op. Measured: {measured}. Measure it: compat sweep {flags}")
    after = supported + found.moves
    n = len(found.affected)
    how = (f"measured by re-running the {n} affected architecture{'' if n == 1 else 's'}"
           if found.measured_by == "rerun" else
           f"re-judged from the stored CPU fallback ops of {n} architecture{'' if n == 1 else 's'}")
    # No change is said as such: "0 (was 125)" read as a drop to zero.
    moved = (f"{after} ({percent(after, total)}) out of the box, {_signed(found.moves)} (was {supported})"
             if found.moves else f"{after} ({percent(after, total)}) out of the box, unchanged")
    native = f"native {_signed(found.native_moves)}" if found.native_moves else "native unchanged"
    text = f"{found.key}: {moved}; {native}; {how}"
    if found.gains:
        text += f"; now supported: {', '.join(found.gains)}"
    if found.losses:
        text += f"; no longer supported: {', '.join(found.losses)}"
    if found.unmeasured:
        text += f"; no verdict in the re-run: {', '.join(found.unmeasured)}"
    return found, text
