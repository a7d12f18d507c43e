"""``compat calibrate``: run the observed architectures on the simulated device and compare them with real Trainium.
Reads the observations, the real config corpus and the kept-disagreements file; runs through the sweep's pool."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import transformers
from rich import box
from rich.table import Table
from rich.text import Text

from cli.console import console, fail
from cli.progress import reporter
from cli.tables import Fit, op_name
from compat.checks import RUN_ORDER, WORK_CHECKS
from compat.native import registry_of
from compat.results import ArchitectureEntry, Check, ResultRecord, by_architecture
from compat.settings import get_settings

# The observations' loader lives with the device's data; importing it registers the simulated device, which this
# command resolves right after anyway (and a real torch-neuronx, when installed, keeps precedence).
from neuron_backend.hardware import observations as evidence_file
from worker.catalog.catalog import registry_entries
from worker.catalog.corpus_models import CORPUS_DIR
from worker.judge.calibration import (
    Agreement,
    Comparison,
    Simulated,
    Target,
    agreement,
    compare,
    plan_target,
    source_label,
)
from worker.orchestration.sweep import run_sweep
from worker.run.process.devices import Device, DeviceError, device_versions, resolve_device
from worker.run.process.pool import MemoryLimitTooLow, check_memory_limit

REPORT_VERSION = 1
# The real config.json corpus (shipped product data, worker/catalog/corpus, with index.json naming each file's Hub
# id); were it missing, every class would be judged on its config class defaults, and the rows would say so.
NOTES_PATH = evidence_file.DEFAULT_PATH.with_name("calibration_notes.json")
AGREES = {True: "yes", False: "NO", None: "not counted"}
SHOWN_FALLBACK = 3  # ops a passing row names from its CPU fallback (the JSON has them all)


def load_notes(path: Path, evidence: evidence_file.Evidence) -> dict[str, dict[str, str]]:
    """The kept disagreements: ``{"kept": {class or model id: {reason, source[, check]}}}``. Every key must be an
    observed class or model and every source a cited one: a note that names nothing would explain nothing."""
    try:
        kept = json.loads(path.read_text())["kept"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: cannot read the kept disagreements ({exc})") from exc
    names = {o.architecture for o in evidence.observations} | {o.model_id for o in evidence.observations}
    checks = {str(c) for c in WORK_CHECKS.values()}
    for key, note in kept.items():
        if key not in names:
            raise ValueError(f"{path}: {key!r} is neither an observed architecture nor an observed model id")
        if not isinstance(note, dict) or not note.get("reason") or note.get("source") not in evidence.sources:
            raise ValueError(f"{path}: {key!r} needs a 'reason' and a 'source' defined in the observations")
        if note.get("check", "forward") not in checks:
            raise ValueError(f"{path}: {key!r} names check {note['check']!r}; compared checks: {sorted(checks)}")
    return kept


def real_configs(evidence: evidence_file.Evidence, corpus: Path = CORPUS_DIR) -> dict[str, tuple[str, dict]]:
    """Observed model id -> (file, config) for every observed model with a real config in the corpus: the file an
    observation names, else the index's file with exactly that Hub id (the observations' own matching rule)."""
    try:
        index = {f["model_id"]: f["file"] for f in json.loads((corpus / "index.json").read_text())["files"]
                 if f.get("model_id")}
    except (OSError, ValueError, KeyError, TypeError):
        index = {}  # no corpus here (an installed package): every class is judged on its config defaults
    out: dict[str, tuple[str, dict]] = {}
    for obs in evidence.observations:
        name = obs.config or index.get(obs.model_id)
        if name and obs.model_id not in out and (corpus / name).is_file():
            out[obs.model_id] = (name, json.loads((corpus / name).read_text()))
    return out


def plan(evidence: evidence_file.Evidence, configs: dict[str, tuple[str, dict]], archs: Sequence[str] = (),
         limit: int | None = None) -> tuple[list[Target], dict[str, list[evidence_file.Observation]]]:
    """The observed classes to calibrate (``archs``, else all, by name; the first ``limit``) and their targets."""
    grouped = evidence.by_architecture()
    names = list(dict.fromkeys(archs)) if archs else sorted(grouped)
    names = names[: limit or None]
    registry = registry_of(transformers)
    # The model_type each class is built with: the registry's choice for a causal LM (as `compat sweep` builds it),
    # the config class's own for a native wrapper class (whose text-only causal LM then runs).
    model_types = {e.name: e.model_type for e in registry_entries()}
    for name in names:
        cls = getattr(transformers, name, None) if name not in model_types else None
        own = getattr(getattr(cls, "config_class", None), "model_type", None)
        if own:
            model_types[name] = own
    targets = [plan_target(n, grouped[n], registry, model_types, configs) for n in names]
    return targets, {n: grouped[n] for n in names}


def entries_for(targets: list[Target], configs: dict[str, tuple[str, dict]]) -> list[ArchitectureEntry]:
    """One harness entry per judged class (two observed classes judged as one class run once, the first's config)."""
    out: dict[str, ArchitectureEntry] = {}
    for rank, t in enumerate(targets, start=1):
        if t.judged is None or t.judged in out:
            continue
        config = configs[t.model_id][1] if t.model_id else None
        out[t.judged] = ArchitectureEntry(name=t.judged, model_type=t.model_type or "", rank=rank,
                                          representative=t.model_id, config=config)
    return list(out.values())


def calibrate(*, device: str, limit: int | None, arch: list[str] | None, json_path: Path | None, jobs: int,
              compile_check: bool) -> int:
    """Run, compare, print the table, the agreement figure per check (the strict one first: the same result for the
    same cause) and the disagreements; write ``json_path``."""
    try:  # the shipped data files: broken, they are this checkout's fault, not the user's input (exit 1)
        evidence = evidence_file.load()
        kept = load_notes(NOTES_PATH, evidence)
    except ValueError as exc:
        raise fail(str(exc), 1) from None
    try:
        dev = resolve_device(device)
        if jobs > 0:  # refused before anything runs, as `compat sweep` refuses it
            check_memory_limit(get_settings().arch_memory_mb)
    except (DeviceError, MemoryLimitTooLow) as exc:
        raise fail(str(exc)) from None
    configs = real_configs(evidence)
    targets, grouped = plan(evidence, configs, arch or (), limit)
    pairs = [(w, m) for (w, m), c in WORK_CHECKS.items() if c != Check.COMPILE or compile_check]
    # Only unpatched runs are compared (Observation.outcome_for's default): a check only patched runs ask for
    # (the GRPO train run of Qwen3-8B) would run on every architecture and count nowhere.
    wanted = {WORK_CHECKS[p] for p in pairs if any(r.work == p[0] and r.mode == p[1] and not r.patched
                                                   for obs in grouped.values() for o in obs for r in o.runs)}
    checks = [c for c in RUN_ORDER if c == Check.LOAD or c in wanted]
    entries = entries_for(targets, configs)
    profile = dev.info.details.get("profile")
    console.print(f"calibrating {dev.name} ({dev.info.description}) against {len(targets)} observed architecture(s) "
                  f"of real Trainium hardware: {len(entries)} to run ({', '.join(map(str, checks))}), "
                  f"{len(targets) - sum(1 for t in targets if t.judged)} not judged", highlight=False, soft_wrap=True)
    records: dict[str, list[ResultRecord]] = {}
    if entries:
        with reporter(console, len(entries), f"calibrate {dev.name}") as bar:

            def progress(entry: ArchitectureEntry, recs: list[ResultRecord]) -> None:
                # Each check's status: the sweep's verdict would say "not_judged" (generate is not run here).
                bar.advance(entry.name, ", ".join(f"{r.check} {r.status}" + (f" [{r.blocking_op}]" if r.blocking_op
                                                                             else "") for r in recs))

            # No store: a calibration is a comparison, not a run of the catalog (it never moves a headline).
            report = run_sweep(entries, dev, checks, jobs=jobs, progress=progress, catalog_source="observations")
        records = by_architecture(report.results)
    rows = [row for t in targets for w, m in pairs
            if (row := compare(t, grouped[t.architecture], records.get(t.judged or "", []), w, m,
                               evidence.sources, kept)) is not None]
    rows.sort(key=lambda r: (r.architecture, RUN_ORDER.index(r.check)))
    figures = [agreement(rows, c) for c in checks if c != Check.LOAD]
    _print(rows, figures, dev, profile, kept, dict(evidence.sources))
    if json_path is not None:
        _write_json(json_path, dev, checks, rows, figures, records)
        console.print(f"report: {json_path}", highlight=False)
    return 0


def _print(rows: list[Comparison], figures: list[Agreement], dev: Device, profile: str | None,
           kept: dict[str, dict[str, str]], sources: dict[str, Any]) -> None:
    console.print(calibration_table(rows, sources))
    # Observations come from Trn2 instances: another profile is compared with Trn2 hardware, and the line says so.
    on = f"profile {profile}" if profile else dev.info.description
    for fig in figures:
        console.print(f"{fig.line()} ({dev.name}, {on})", highlight=False, soft_wrap=True)
    if profile and profile != "trn2":
        console.print(f"note: the observations are Trn2 hardware; this ran profile {profile}", highlight=False)
    for fig in figures:
        for label, found in (("disagrees", fig.disagreements), ("same outcome, different cause", fig.differently),
                             ("same outcome, real cause not recorded", fig.cause_unknown)):
            for r in found:
                # One line each, never wrapped: a log's grep and bench/README.md take them as they are.
                console.print(f"{label}: {r.architecture} {r.check}: {r.cause}"
                              + (f"; kept: {r.kept}" if r.kept else ""), highlight=False, markup=False, soft_wrap=True)
    used = {k for r in rows if r.kept for k in (r.architecture, *r.observed.models) if k in kept}
    judged = {k for r in rows for k in (r.architecture, *r.observed.models)}
    for key in sorted(set(kept) & judged - used):
        console.print(f"note: {NOTES_PATH.name} keeps a disagreement for {key}, which agrees now (stale?)",
                      highlight=False, soft_wrap=True)


def _sim_ops(sim: Simulated) -> tuple[str | None, ...]:
    return (sim.op, *sim.fallback_ops[:SHOWN_FALLBACK]) if sim.outcome == "pass" else (sim.op,)


def _simulation(r: Comparison) -> str:
    if r.simulated is None:
        return "-"
    sim = r.simulated
    text = sim.text
    if sim.outcome == "pass" and sim.fallback_ops:
        text += f" (CPU fallback: {', '.join(sim.fallback_ops[:SHOWN_FALLBACK])})"
    return text


def _observed(r: Comparison, sources: dict[str, Any]) -> str:
    obs = r.observed
    text = obs.outcome + (f" [{obs.op}]" if obs.op else "")
    if len(obs.models) > 1:
        text += f", {len(obs.models)} models"
    if obs.toolchains:
        text += f" ({', '.join(obs.toolchains)}; {', '.join(dict.fromkeys(source_label(s, sources) for s in obs.sources))})"
    return text


def calibration_table(rows: list[Comparison], sources: dict[str, Any]) -> Fit:
    """architecture | judged (class, config) | observed (outcome, toolchain) | simulation | agrees | cause: one row
    per observed class and check where the terminal is wide enough, else one block per row; ops stay whole."""
    ops = {op for r in rows for op in (r.observed.op, *(_sim_ops(r.simulated) if r.simulated else ())) if op}
    wide = Table(title="simulation vs real Trainium hardware")
    wide.add_column("architecture", no_wrap=True)
    # The simulation column is as wide as its longest spelled op, so an op (with its dtypes) is never folded.
    for col, least in (("judged: class, config", 16), ("observed (toolchain)", 14),
                       ("simulation", max([14, *(len(op) for op in ops)]))):
        wide.add_column(col, min_width=least, overflow="fold")
    wide.add_column("agrees", no_wrap=True)
    wide.add_column("cause", min_width=24, overflow="fold")
    narrow = Table(title="simulation vs real Trainium hardware", box=box.SIMPLE_HEAD, show_lines=True)
    narrow.add_column("architecture / judged / observed / simulation / cause", ratio=1, overflow="fold")
    narrow.add_column("agrees", no_wrap=True)
    for r in rows:
        arch = r.architecture + ("" if r.check == Check.FORWARD else f" ({r.check})")
        judged = f"{r.target.judged}, {r.target.config_label}" if r.target.judged else "not judged"
        cause = (r.cause or "") + ("; kept (reason below)" if r.kept else "")  # the reason is a paragraph
        wide.add_row(arch, Text(judged), Text(_observed(r, sources)), Text(_simulation(r)), AGREES[r.agrees], Text(cause))
        cell = Text(arch, style="bold")
        for label, value in (("judged", judged), ("real", _observed(r, sources)), ("sim", _simulation(r)), ("cause", cause)):
            if value and value != "-":
                cell.append(f"\n{label}: {value}")
        narrow.add_row(cell, AGREES[r.agrees])
    return Fit([wide, narrow], {op_name(op) for op in ops} | {str(AGREES[r.agrees]) for r in rows})


def _write_json(path: Path, dev: Device, checks: list[Check], rows: list[Comparison], figures: list[Agreement],
                records: dict[str, list[ResultRecord]]) -> None:
    payload: dict[str, Any] = {
        "version": REPORT_VERSION,
        "created": datetime.now(UTC).isoformat(),
        "device": dev.info.model_dump(mode="json"),
        "versions": device_versions(dev),
        "observations": str(evidence_file.DEFAULT_PATH.name),
        "checks": [str(c) for c in checks],
        # strict: the same result for the same cause (the headline); agrees: the same outcome, whatever the cause.
        "agreement": [{"check": str(f.check), "strict": f.strict, "agrees": f.agrees, "counted": f.counted,
                       "different_cause": [r.architecture for r in f.differently],
                       "cause_unknown": [r.architecture for r in f.cause_unknown],
                       "not_counted": f.not_counted, "line": f.line()} for f in figures],
        "rows": [{**asdict(r), "check": str(r.check)} for r in rows],
        "results": [rec.model_dump(mode="json") for recs in records.values() for rec in recs],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1))  # atomic: a reader never sees half a report
    tmp.replace(path)
