"""The calibration rule: does the simulated device agree with what real Trainium hardware was seen to do?
Pure: observations (neuron_backend.hardware.observations) and the simulation's records in, one comparison per row out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from compat.checks import WORK_CHECKS
from compat.native import NativeRegistry, remote_code_verdict
from compat.ops import op_name
from compat.results import FAILURE_STATUSES, NO_VERDICT_STATUSES, Check, ResultRecord, Status

if TYPE_CHECKING:  # types only: importing neuron_backend registers the device (torch), which judging never needs
    from neuron_backend.hardware.observations import Observation, Source

# Observed work and mode -> the check that does the same on the simulation: compat/checks.py (``observed_as``).
# Why a row is not counted in the agreement figure, in the order the figure names them.
NOT_JUDGED = "not judged (not in the installed Transformers, or remote code)"
NO_OBSERVED = "observed outcome unknown or partial"
NO_VERDICT = "the simulation gave no verdict (reference_fail, harness_error or skipped)"
NOT_COUNTED = (NOT_JUDGED, NO_OBSERVED, NO_VERDICT)
SHOWN_MODELS = 3  # observed models a cause names (the rest counted)
CLAUSE_CHARS = 120  # a known issue's or an error's first clause, as much as a cause quotes of it


@dataclass(frozen=True)
class Target:
    """What the simulation runs for one observed architecture class, or why it runs nothing."""

    architecture: str  # the observed class
    judged: str | None = None  # the causal-LM class the simulation builds; None: not judged
    model_type: str | None = None
    model_id: str | None = None  # the observed model whose real config is shrunk; None: the config class defaults
    config_file: str | None = None  # that config's file in the corpus
    not_judged: str | None = None  # why nothing runs
    note: str | None = None  # how the judged class was chosen, when it is not the observed one

    @property
    def config_label(self) -> str:
        if self.judged is None:
            return "-"
        return f"{self.model_id} ({self.config_file})" if self.config_file else f"{self.model_type} config defaults"


def plan_target(architecture: str, observations: Sequence[Observation], registry: NativeRegistry,
                class_model_type: Mapping[str, str], configs: Mapping[str, tuple[str, dict[str, Any]]]) -> Target:
    """The class and config the simulation runs for ``architecture``. ``configs``: observed model id -> (corpus
    file, config dict), the real configs available; the first observed model with one is used (file order).
    ``class_model_type``: class -> its config class's model_type, for native classes that are not causal LMs."""
    real = next(((o.model_id, *configs[o.model_id]) for o in observations if o.model_id in configs), None)
    version = registry.version
    if architecture not in registry.classes:
        return Target(architecture, not_judged=f"not a class of Transformers {version}: the model's repository "
                                               "code would be needed (remote code is never run)")
    if real is not None:
        verdict = remote_code_verdict(real[2], registry)
        if verdict.remote_code:
            return Target(architecture, model_id=real[0], config_file=real[1], not_judged=verdict.reason)
    if architecture in registry.causal_lm_classes:
        model_type = str(real[2]["model_type"]) if real else class_model_type.get(architecture)
        if real is None:
            return Target(architecture, judged=architecture, model_type=model_type)
        return Target(architecture, judged=architecture, model_type=model_type, model_id=real[0], config_file=real[1])
    # A native class that is no causal LM (a vision-language wrapper): the observations loaded these models with
    # AutoModelForCausalLM, text only, so the simulation runs the class that builds for the same model_type.
    model_type = class_model_type.get(architecture)
    causal = registry.causal_lm.get(model_type or "")
    if causal is None:
        return Target(architecture, model_type=model_type,
                      not_judged=f"not a causal-LM class of Transformers {version}, and model_type {model_type!r} "
                                 "has none")
    note = f"AutoModelForCausalLM builds {causal} for model_type {model_type!r}, as the observed runs loaded it"
    if real is None:
        return Target(architecture, judged=causal, model_type=model_type, note=note)
    return Target(architecture, judged=causal, model_type=model_type, model_id=real[0], config_file=real[1],
                  note=note)


@dataclass(frozen=True)
class Observed:
    """What real hardware did with one work and mode, over every unpatched run of the class's observed models."""

    outcome: str  # pass | fail | partial | unknown
    models: tuple[str, ...] = ()  # the models whose runs gave it
    toolchains: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # source ids of those runs
    error: str | None = None  # the first recorded error of a failing run
    op: str | None = None
    why: str = ""  # a partial's split: which models passed, which failed


def observed(observations: Iterable[Observation], work: str, mode: str) -> Observed:
    """Unpatched runs only: the simulation runs Transformers' own code, so a patched model is another program."""
    by_outcome: dict[str, list[str]] = {}
    toolchains: list[str] = []
    sources: list[str] = []
    error = op = None
    for obs in observations:
        outcome = obs.outcome_for(work, mode, patched=False)
        if outcome == "unknown":
            continue
        by_outcome.setdefault(outcome, []).append(obs.model_id)
        toolchains.append(obs.toolchain)
        for run in obs.runs:
            if run.work == work and run.mode == mode and not run.patched and run.outcome != "unknown":
                sources.append(run.source or obs.source)
                if run.outcome == "fail" and error is None and op is None:
                    error, op = run.error, run.op
    if not by_outcome:
        return Observed("unknown")
    models = tuple(dict.fromkeys(m for ms in by_outcome.values() for m in ms))
    outcome = next(iter(by_outcome)) if len(by_outcome) == 1 else "partial"
    why = "; ".join(f"{k}: {', '.join(dict.fromkeys(v))}" for k, v in sorted(by_outcome.items())) \
        if outcome == "partial" else ""
    return Observed(outcome, models, tuple(dict.fromkeys(toolchains)), tuple(dict.fromkeys(sources)), error, op, why)


@dataclass(frozen=True)
class Simulated:
    """The simulation's verdict on the same work: ``pass`` (it ran), ``fail``, or ``none`` (no verdict)."""

    outcome: str
    check: str  # the check that decided: load when the model did not load, else the compared check
    status: str
    op: str | None = None
    error: str | None = None  # the error's first line
    known_issue: str | None = None
    reason: str | None = None
    fallback_ops: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        # A model that did not load never reached the compared check: say which check decided.
        prefix = "load " if self.check == str(Check.LOAD) else ""
        return prefix + self.status + (f" [{self.op}]" if self.op else "")


def simulated(records: Iterable[ResultRecord], check: Check) -> Simulated:
    """Load must pass before the compared check counts. A ``mismatch`` ran: the observations' "pass" means the model
    ran and gave a measurement (A checks top-1 tokens against the device's own eager run, never a CPU reference),
    so numerics off the CPU reference do not contradict it; the status stays visible in the row."""
    by_check = {r.check: r for r in records}
    for rec in (by_check.get(Check.LOAD), by_check.get(check)):
        if rec is None:
            return Simulated("none", str(check), "not run")
        first = rec.error.message.splitlines()[0] if rec.error and rec.error.message else None
        fields = dict(check=str(rec.check), status=str(rec.status), op=rec.blocking_op, error=first,
                      known_issue=rec.known_issue, reason=rec.reason, fallback_ops=tuple(rec.fallback_ops))
        if rec.status in NO_VERDICT_STATUSES:
            return Simulated("none", **fields)
        if rec.status in FAILURE_STATUSES and not (rec.check == check and rec.status == Status.MISMATCH):
            return Simulated("fail", **fields)
        if rec.check == check:
            return Simulated("pass", **fields)
    raise AssertionError("unreachable: the compared check's record decides")


@dataclass(frozen=True)
class Comparison:
    """One observed architecture and check: both sides, whether they agree, and why not."""

    target: Target
    check: Check
    work: str
    mode: str
    observed: Observed
    simulated: Simulated | None  # None: not judged
    agrees: bool | None  # None: not counted (see ``not_counted``)
    not_counted: str | None = None  # one of NOT_COUNTED
    cause: str | None = None  # every disagreement's, a not-counted row's reason, both-fail rows failing differently
    kept: str | None = None  # a written reason from the kept-disagreements file

    @property
    def architecture(self) -> str:
        return self.target.architecture


def _clause(text: str) -> str:
    # The first clause says what happened; the rest (sources, knobs) is in the record and the observation.
    first = text.split(" (", 1)[0].split("; ", 1)[0].strip().rstrip(".")
    return first if len(first) <= CLAUSE_CHARS else first[: CLAUSE_CHARS - 3] + "..."


def source_label(source_id: str, sources: Mapping[str, Source]) -> str:
    """``A LEADERBOARD.md``: the evidence letter and the cited file's name (repository and commit are in the data)."""
    src = sources.get(source_id)
    return f"{src.ref} {PurePosixPath(src.path).name}" if src is not None else source_id


def _real_side(obs: Observed, sources: Mapping[str, Source]) -> str:
    cited = ", ".join(dict.fromkeys(source_label(s, sources) for s in obs.sources))  # one results.tsv per model
    models = ", ".join(obs.models[:SHOWN_MODELS]) + (f" +{len(obs.models) - SHOWN_MODELS} more"
                                                     if len(obs.models) > SHOWN_MODELS else "")
    return f"{models}, source {cited}"


def _cause(obs: Observed, sim: Simulated, sources: Mapping[str, Source]) -> str | None:
    real = _real_side(obs, sources)
    if obs.outcome == "pass" and sim.outcome == "fail":
        where = f"at {sim.op}" if sim.op else f"in {sim.check} ({sim.status})"
        why = (f"profile known issue: {_clause(sim.known_issue)}" if sim.known_issue
               else _clause(sim.error or sim.reason or sim.status))
        return f"simulation fails {where}: {why}; real hardware ran it ({real})"
    if obs.outcome == "fail" and sim.outcome == "pass":
        if obs.error or obs.op:
            said = "real hardware failed" + (f" at {obs.op}" if obs.op else "") \
                + (f": {_clause(obs.error)}" if obs.error else " (error not recorded)")
        else:
            said = "real hardware failed, real cause not recorded"
        fell = [f for f in sim.fallback_ops if obs.op and op_name(f) == op_name(obs.op)]
        ran = "the simulation ran it" + (f", {fell[0]} on the CPU fallback" if fell else "")
        if sim.status == Status.MISMATCH:
            ran += " (numerics off the CPU reference: mismatch)"
        return f"{said} ({real}); {ran}"
    if obs.outcome == sim.outcome == "fail" and (obs.op or obs.error):
        # The outcome agrees; say so when the recorded reasons do not (a full-size OOM is no missing kernel).
        if obs.op and sim.op and op_name(obs.op) == op_name(sim.op):
            return None
        real_at = (f" at {obs.op}" if obs.op else "") + (f": {_clause(obs.error)}" if obs.error else "")
        sim_at = f"at {sim.op}" if sim.op else f"in {sim.check} ({sim.status})"
        return f"both fail, differently: real hardware{real_at} ({real}); the simulation {sim_at}"
    return None


def compare(target: Target, observations: Sequence[Observation], records: Iterable[ResultRecord], work: str,
            mode: str, sources: Mapping[str, Source], kept: Mapping[str, Mapping[str, str]] | None = None
            ) -> Comparison | None:
    """The row for ``work``/``mode`` of one observed class; None when it has no such run or no check does it."""
    check = WORK_CHECKS.get((work, mode))
    if check is None or not any(r.work == work and r.mode == mode for o in observations for r in o.runs):
        return None
    obs = observed(observations, work, mode)
    if target.judged is None:
        return Comparison(target, check, work, mode, obs, None, None, NOT_JUDGED, target.not_judged)
    sim = simulated(records, check)
    if obs.outcome in ("unknown", "partial"):
        why = f"observed {obs.outcome}" + (f" ({obs.why})" if obs.why else "")
        return Comparison(target, check, work, mode, obs, sim, None, NO_OBSERVED, why)
    if sim.outcome == "none":
        why = f"simulation {sim.check} {sim.status}" + (f": {_clause(sim.reason)}" if sim.reason else "")
        return Comparison(target, check, work, mode, obs, sim, None, NO_VERDICT, why)
    agrees = obs.outcome == sim.outcome
    cause = _cause(obs, sim, sources)
    note = kept_note(kept or {}, target, check, obs.models) if not agrees else None
    text = f"{note['reason']} (source {source_label(note['source'], sources)})" if note else None
    return Comparison(target, check, work, mode, obs, sim, agrees, None, cause, text)


def kept_note(kept: Mapping[str, Mapping[str, str]], target: Target, check: Check,
              models: Iterable[str]) -> Mapping[str, str] | None:
    """The written reason kept for this row: keyed by the class or an observed model id, for its ``check``
    (default forward, the check every observation has)."""
    for key in (target.architecture, *models):
        note = kept.get(key)
        if note is not None and note.get("check", str(Check.FORWARD)) == str(check):
            return note
    return None


# How an agreeing row's causes compare: the strict figure counts only ``SAME_CAUSE`` (issue 30 item 3).
SAME_CAUSE = "same result, same cause"  # both pass, or both fail at the same op
DIFFERENT_CAUSE = "same result, different recorded causes"  # both fail, for reasons that differ (a deadlock, an OOM)
CAUSE_UNKNOWN = "same result, real cause not recorded"  # both fail; the real run recorded no op and no error


def cause_match(row: Comparison) -> str | None:
    """For an agreeing row, whether the causes agree too (one of SAME_CAUSE, DIFFERENT_CAUSE, CAUSE_UNKNOWN); None
    for a row that disagrees or is not counted. Both failing is the same cause only where both name the same op;
    ``_cause`` words every other both-fail row that has a recorded reason ("both fail, differently")."""
    if not row.agrees:
        return None
    if row.observed.outcome == "pass":
        return SAME_CAUSE
    if not (row.observed.op or row.observed.error):
        return CAUSE_UNKNOWN
    return DIFFERENT_CAUSE if row.cause else SAME_CAUSE


@dataclass(frozen=True)
class Agreement:
    """The figure for one check over the counted rows: ``strict`` (the headline: the same result for the same
    cause), ``agrees`` (the same outcome, whatever the cause), the agreeing rows whose causes differ or are not
    recorded (counted apart), and what was left out and why."""

    check: Check
    agrees: int
    counted: int
    not_counted: dict[str, int] = field(default_factory=dict)
    disagreements: tuple[Comparison, ...] = ()
    differently: tuple[Comparison, ...] = ()  # agreeing rows that fail on both sides for different recorded reasons
    cause_unknown: tuple[Comparison, ...] = ()  # agreeing rows that fail on both sides, the real cause not recorded

    @property
    def strict(self) -> int:
        """Rows with the same result for the same cause: agreeing rows less those failing for other causes."""
        return self.agrees - len(self.differently) - len(self.cause_unknown)

    def line(self) -> str:
        """The strict figure first, then the outcome-only one and the agreeing rows it counts apart, by name."""
        def share(n: int) -> str:
            return f" ({100 * n / self.counted:.1f}%)" if self.counted else ""

        text = (f"{self.check}: same result for the same cause on {self.strict} of {self.counted} observed "
                f"architectures{share(self.strict)}")
        apart = [(rows, why) for rows, why in ((self.differently, "for different recorded reasons"),
                                               (self.cause_unknown, "with the real cause not recorded")) if rows]
        if apart:
            text += f"; same outcome on {self.agrees} of {self.counted}{share(self.agrees)}, counting " + " and ".join(
                f"{len(rows)} failing on both sides {why} ({', '.join(r.architecture for r in rows)})"
                for rows, why in apart)
        left = [f"{n} {why}" for why, n in self.not_counted.items() if n]
        if left:
            text += f"; {sum(self.not_counted.values())} not counted: " + ", ".join(left)
        return text


def agreement(rows: Iterable[Comparison], check: Check) -> Agreement:
    rows = [r for r in rows if r.check == check]
    counted = [r for r in rows if r.agrees is not None]
    left = {why: sum(1 for r in rows if r.not_counted == why) for why in NOT_COUNTED}
    return Agreement(check, sum(1 for r in counted if r.agrees), len(counted), left,
                     tuple(r for r in counted if not r.agrees),
                     tuple(r for r in counted if cause_match(r) == DIFFERENT_CAUSE),
                     tuple(r for r in counted if cause_match(r) == CAUSE_UNKNOWN))
