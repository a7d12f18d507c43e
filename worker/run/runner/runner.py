"""``run_architecture``: the ONE "run one architecture" function, called by the in-process pool and Celery tasks.

Build the tiny checkpoint, prepare the CPU reference, run the requested checks on the device; never raises —
every failure, including the harness's own, becomes result records, each carrying its part of the captured log.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from compat.checks import CACHED_PART, RUN_ORDER, SUPPORT_CHECKS
from compat.results import ArchitectureEntry, Check, ErrorInfo, OpTrace, ResultRecord, Status, failure_records
from worker.build.build import build_checkpoint
from worker.build.tiny_config import ConfigTooLarge, NotBuildable, SourceConfigError
from worker.judge.attribution import missing_package, missing_package_reason, reference_blame
from worker.judge.known_issues import annotate, load_known_issues
from worker.run.checks.checks import CheckContext, run_check
from worker.run.process.capture import take_log
from worker.run.process.devices import Device, process_device
from worker.run.process.pool import warm_imports
from worker.run.process.stack_room import call_with_stack_room
from worker.run.reference.reference import ReferenceFailure, prepare_reference
from worker.run.reference.reference_cache import default_cache, default_checkpoint_cache
from worker.run.runner.checkpoints import tiny_checkpoint
from worker.run.runner.reproducers import ReproFn, repro_command

# emit(kind, payload): "phase" (its name), "record" (a ResultRecord, as each check ends), "trace" (an OpTrace),
# "setting" (its key: the records after it are that setting's, see run_architecture's ``settings``).
Emit = Callable[[str, Any], None]
# (key, a context to run the checks in): one pass of the checks over the same build and reference.
Setting = tuple[str, Callable[[], AbstractContextManager[object]]]


def _ordered(checks: Iterable[Check | str]) -> list[Check]:
    wanted = {Check(c) for c in checks}
    return [c for c in RUN_ORDER if c in wanted]


def _build_failure(exc: Exception) -> tuple[Status, str]:
    """Who is to blame when the tiny model cannot be built; never the device.

    - a package Transformers needs for the class is missing (its "requires the X library" ImportError): the
      harness's environment lacks it, ``harness_error`` naming the package (never ``reference_fail``: the CPU
      reference did not fail, it never ran);
    - the entry names nothing buildable (remote code, not a causal LM) or its own config does not load in
      Transformers: the input's limit, ``skipped`` with the reason;
    - anything else (the shrinker's config refused, too large, init failing): ``harness_error``, our bug.
    """
    # One line: Transformers' ImportError texts span several lines with pip hints; the stored reason is a summary.
    message = " ".join(str(exc).split())
    if (package := missing_package(exc)) is not None:
        return Status.HARNESS_ERROR, missing_package_reason(package, message)
    if isinstance(exc, NotBuildable | SourceConfigError):
        return Status.SKIPPED, f"not built: {message}"
    if isinstance(exc, ConfigTooLarge):
        return Status.HARNESS_ERROR, f"refused before allocation: {message}"
    return Status.HARNESS_ERROR, f"tiny model build failed (harness): {type(exc).__name__}: {message}"


def support_parts_done(order: list[Check], check: Check, rec: ResultRecord) -> bool:
    """Whether, once ``check`` has run, the reference holds the ops of every support check (forward's from the start,
    generate's once the generate check computed its reference): generate is the last support check, it ran, and it
    did not stop before or inside its reference (skipped, reference_fail, harness_error: not known, so never)."""
    return (check == Check.GENERATE and all(c in order for c in SUPPORT_CHECKS)
            and rec.status not in (Status.SKIPPED, Status.REFERENCE_FAIL, Status.HARNESS_ERROR))


def _safe_dirname(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100]


def run_architecture(
    entry: ArchitectureEntry,
    device: Device,
    checks: Iterable[Check | str],
    *,
    seed: int = 0,
    workdir: Path | None = None,
    emit: Emit | None = None,
    known_issues_path: Path | None = None,
    repro: ReproFn = repro_command,
    settings: Sequence[Setting] = (),
) -> list[ResultRecord]:
    """Run ``checks`` for one architecture on ``device``; returns one record per check and never raises.
    ``repro`` writes a failed record's reproducer command (a submission run's rebuilds the submitted config).

    ``emit("record", record)`` is called as each check finishes and ``emit("trace", op_trace)`` once the reference
    op trace exists, so a supervisor keeps partial results if this process dies. When this process's output is
    captured, each record carries the output printed since the record before it (``capture.take_log``).

    ``settings``: the checks run once per setting, inside its context, after one build and one CPU reference (the
    decisions' re-runs of one architecture under several device switches); ``emit("setting", key)`` comes before
    each setting's records, and the records of all come back in that order.
    """
    # Every executor calls this from a different stack depth (Celery's is ~45 frames): with stack room below
    # the checks, their per-op Python hot loops run equally fast under all of them (worker/stack_room.py).
    return call_with_stack_room(_run_architecture, entry, device, checks, seed=seed, workdir=workdir, emit=emit,
                                known_issues_path=known_issues_path, repro=repro, settings=settings)


def _run_architecture(entry: ArchitectureEntry, device: Device, checks: Iterable[Check | str], *, seed: int,
                      workdir: Path | None, emit: Emit | None, known_issues_path: Path | None,
                      repro: ReproFn, settings: Sequence[Setting]) -> list[ResultRecord]:
    order = _ordered(checks)
    # The settings whose records are not all out yet, the first the current one (a plain run: one that sets nothing).
    left: list[Setting] = list(settings) or [("", contextlib.nullcontext)]
    current: list[ResultRecord] = []  # the current setting's records so far
    begun = False  # whether the current setting has begun (its records may have started)
    dev_name = device.name
    done: list[ResultRecord] = []
    own_dir = workdir is None
    base = Path(tempfile.mkdtemp(prefix="compat-")) if own_dir else Path(workdir)
    out_dir = base / _safe_dirname(entry.name)

    def phase(name: str) -> None:
        # A line per phase in the captured log: a crash's log then says where it happened.
        print(f"[compat] {entry.name} on {dev_name}: {name}", flush=True)
        if emit is not None:
            emit("phase", name)

    def finish(recs: list[ResultRecord]) -> list[ResultRecord]:
        try:
            recs = annotate(recs, load_known_issues(known_issues_path))
        except Exception:  # noqa: BLE001 - a broken known-issues file must not lose results
            pass
        for rec in recs:
            print(f"[compat] {rec.check}: {rec.status}" + (f" ({rec.reason})" if rec.reason else "")
                  + (f" [{rec.blocking_op}]" if rec.blocking_op else ""), flush=True)
            if rec.error is not None:  # the full traceback is in rec.error; the log gets the headline
                print(f"[compat]   {rec.error.type}: {rec.error.message.splitlines()[0] if rec.error.message else ''}",
                      flush=True)
        if recs:  # the output since the previous record (this check's, its status lines included) goes with it
            recs[0].log = take_log()
        if emit is not None:
            for rec in recs:
                emit("record", rec)
        done.extend(recs)
        current.extend(recs)
        return recs

    def start() -> None:
        # The next setting's records begin (announced only when there are settings: a plain run emits as before).
        nonlocal begun
        current.clear()
        begun = True
        if settings and emit is not None:
            emit("setting", left[0][0])

    def next_setting() -> None:
        nonlocal begun
        left.pop(0)
        begun = False

    def harness_error(exc: BaseException) -> None:
        # The current setting's checks that have no record yet: the harness's fault, never the device's.
        err = ErrorInfo(type=type(exc).__name__, message=str(exc)[:2000],
                        traceback="".join(traceback.format_exception(exc))[-4000:])
        have = {r.check for r in current}
        finish(failure_records(entry, dev_name, [c for c in order if c not in have], Status.HARNESS_ERROR,
                               "harness error while running the architecture", error=err))

    def every_setting(recs: list[ResultRecord]) -> list[ResultRecord]:
        # Build and reference happen once, so their failure is every setting's.
        while left:
            start()
            finish([r.model_copy(deep=True) for r in recs])
            next_setting()
        return done

    try:
        if entry.remote_code:
            why = next((n for n in entry.notes if n.startswith("remote code")), "remote code: needs trust_remote_code")
            return every_setting(failure_records(entry, dev_name, order, Status.SKIPPED, why))
        phase("build")
        try:
            # Kept beside the CPU references: a warm repeat, and each re-run of the phases after the sweep, copies the
            # checkpoint's files back instead of building it again (checkpoints.py).
            built = tiny_checkpoint(entry, out_dir, seed=seed, cache=default_checkpoint_cache(),
                                    build=build_checkpoint)
        except Exception as exc:  # noqa: BLE001
            return every_setting(failure_records(entry, dev_name, order, *_build_failure(exc)))
        phase("reference")
        try:
            ref = prepare_reference(built.path, device.policy, seed, cache=default_cache())
        except ReferenceFailure as exc:
            return every_setting(failure_records(entry, dev_name, order, *reference_blame(exc)))
        if emit is not None:
            emit("trace", OpTrace(architecture=entry.name, ops=ref.ops))
        if not ref.determinism.passed:
            return every_setting([r.model_copy(update={"metrics": dict(ref.determinism.metrics)}) for r in
                                  failure_records(entry, dev_name, order, Status.REFERENCE_FAIL,
                                                  ref.determinism.reason or "reference")])
        support_ops: list[str] | None = None
        while left:
            start()
            try:
                with left[0][1]():
                    # A fresh context per setting: each loads the model anew (the load check is one of its checks).
                    ctx = CheckContext(entry.name, entry.rank, device, ref, checks=tuple(order))
                    for check in order:
                        phase(str(check))
                        rec = run_check(ctx, check)
                        if rec.status != Status.PASS:
                            rec.repro = repro(entry.name, dev_name, check)
                        rec.metrics.setdefault("n_params", built.n_params)
                        if (part := CACHED_PART.get(check)) in ref.cache_status:  # the sweep counts hits, misses
                            rec.metrics.setdefault("reference_cache", ref.cache_status[part])
                        if entry.notes and check == order[0]:
                            rec.metrics.setdefault("config_notes", list(entry.notes))  # "auto_map ignored: ..."
                        finish([rec])
                        if support_parts_done(order, check, rec):
                            support_ops = list(ref.ops)
                    del ctx
            except Exception as exc:  # noqa: BLE001 - this setting's (its settings, a harness bug): not the next one's
                harness_error(exc)
            next_setting()
        if emit is not None:  # the trace grows with generate/train reference runs: send the final one
            emit("trace", OpTrace(architecture=entry.name, ops=ref.ops, support_ops=support_ops))
        return done
    except BaseException as exc:  # noqa: BLE001 - the contract is "never raises"; KeyboardInterrupt re-raised
        if isinstance(exc, KeyboardInterrupt):
            raise
        while left:  # the current setting's checks not run yet, then every later setting's
            if not begun:
                start()
            harness_error(exc)
            next_setting()
        return done
    finally:
        shutil.rmtree(base if own_dir else out_dir, ignore_errors=True)


def warm_worker(threads: int, device: str) -> None:
    """Pool warm-up: torch/transformers imported once, the device resolved (neuron_backend registered) once."""
    warm_imports(threads)
    process_device(device)


def run_on(entry: ArchitectureEntry, device: str, checks: Iterable[Check | str], *, seed: int = 0,
           workdir: Path | None = None, emit: Emit | None = None, repro: ReproFn = repro_command
           ) -> list[ResultRecord]:
    """``run_architecture`` for a caller in another process (a pool task, a Celery task): the device arrives by
    name and is resolved once per process. ``COMPAT_RUN_HOOK`` stand-ins have this signature (``repro`` optional:
    the sweep passes it only to the real runner)."""
    return run_architecture(entry, process_device(device), checks, seed=seed, workdir=workdir, emit=emit,
                            repro=repro)
