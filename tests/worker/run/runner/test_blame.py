"""A failure is blamed where it belongs (issue 13, finding 2): the harness's own bugs are ``harness_error``, never
``reference_fail``; a memory limit below a warm worker's idle size is refused at start-up, not reported per check."""

from __future__ import annotations

import pytest
import typer

from cli import commands
from compat.results import DEFAULT_CHECKS, ArchitectureEntry, Status
from compat.settings import get_settings
from worker.build.tiny_config import ConfigTooLarge, NotBuildable, SourceConfigError, TinyConfigError
from worker.orchestration import celery_app
from worker.orchestration.sweep import abort_records, run_sweep
from worker.run.process.devices import resolve_device
from worker.run.process.pool import (
    WORKER_IDLE_FLOOR_MB,
    MemoryLimitTooLow,
    Outcome,
    Pool,
    Task,
    check_memory_limit,
)
from worker.run.runner import runner

LLAMA = ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1)


def _import_error() -> Exception:
    try:
        raise ImportError("needs the 'mamba_ssm' package")
    except ImportError as cause:
        try:
            raise TinyConfigError("cannot initialise X") from cause
        except TinyConfigError as exc:
            return exc


@pytest.mark.parametrize(("exc", "status"), [
    (TinyConfigError("tiny Phi3Config invalid: short_factor must have length 8, got 48"), Status.HARNESS_ERROR),
    (ConfigTooLarge("tiny X would have 9,000,000 parameters"), Status.HARNESS_ERROR),
    (RuntimeError("init failed"), Status.HARNESS_ERROR),
    (NotBuildable("X needs remote code; it is never built"), Status.SKIPPED),
    (SourceConfigError("the model's own config does not load"), Status.SKIPPED),
    (_import_error(), Status.HARNESS_ERROR),  # a missing package is the harness's environment (issue 30 item 4)
])
def test_build_failures_are_blamed_on_who_caused_them(exc: Exception, status: Status) -> None:
    assert runner._build_failure(exc)[0] == status


def test_a_shrinker_bug_is_a_harness_error_on_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # The Phi-3.x longrope configs ended with every check reference_fail: the shrinker's mistake, not the CPU's.
    def broken(*_: object, **__: object) -> None:
        raise TinyConfigError("tiny Phi3Config invalid: `rope_parameters`'s short_factor field must have length 8")

    monkeypatch.setattr(runner, "build_checkpoint", broken)
    recs = runner.run_architecture(LLAMA, resolve_device("cpu"), DEFAULT_CHECKS)
    assert {r.status for r in recs} == {Status.HARNESS_ERROR} and len(recs) == len(DEFAULT_CHECKS)
    assert "short_factor" in recs[0].reason


def test_an_exception_inside_the_runner_is_a_harness_error_not_a_device_error(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    def boom(*_: object, **__: object) -> None:
        raise KeyError("bug in the harness")

    monkeypatch.setattr(runner, "prepare_reference", boom)
    recs = runner.run_architecture(LLAMA, resolve_device("cpu"), DEFAULT_CHECKS)
    assert {r.status for r in recs} == {Status.HARNESS_ERROR} and recs[0].error.type == "KeyError"


@pytest.mark.parametrize(("phase", "status"), [(None, Status.HARNESS_ERROR), ("build", Status.HARNESS_ERROR),
                                               ("reference", Status.REFERENCE_FAIL)])
def test_a_worker_stopped_before_the_checks_is_never_the_devices(phase: str | None, status: Status) -> None:
    out = Outcome(Task("x", "m:f"), "memory", error="memory limit 300 MB exceeded (RSS 356 MB)")
    assert {r.status for r in abort_records(LLAMA, "cpu", list(DEFAULT_CHECKS), set(), phase, out)} == {status}


def test_a_memory_limit_below_the_floor_is_refused_with_the_setting_named() -> None:
    with pytest.raises(MemoryLimitTooLow, match=r"memory limit 300 MB \(COMPAT_ARCH_MEMORY_MB\) is too low"):
        check_memory_limit(300)
    check_memory_limit(WORKER_IDLE_FLOOR_MB + 1)
    with pytest.raises(MemoryLimitTooLow, match="a warm worker uses 500 MB"):
        check_memory_limit(450, idle_mb=500)


class _Store:
    def __init__(self) -> None:
        self.started = 0

    def start_run(self, *_: object) -> str:
        self.started += 1
        return "r"


def test_a_sweep_refuses_a_low_memory_limit_before_the_run_exists() -> None:
    # It used to start, kill each worker on its first task and store four reference_fail per architecture.
    store = _Store()
    with pytest.raises(MemoryLimitTooLow):
        run_sweep([LLAMA], resolve_device("cpu"), DEFAULT_CHECKS, jobs=1, store=store, memory_limit_mb=300)
    assert store.started == 0


def test_the_pool_refuses_a_limit_its_started_workers_already_exceed() -> None:
    # Measured, not assumed: a bare worker (no torch) is ~30 MB; a 5 MB limit cannot hold it.
    with Pool(1, time_limit_s=30, memory_limit_mb=5, warmup=None) as pool, pytest.raises(MemoryLimitTooLow,
                                                                                         match="warm worker uses"):
        list(pool.run([Task("t", "os:getpid")]))


def test_compat_sweep_and_compat_worker_refuse_it_at_start_up(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("COMPAT_ARCH_MEMORY_MB", "300")
    get_settings.cache_clear()
    try:
        with pytest.raises(typer.Exit) as info:
            commands.sweep(device="cpu", source="registry", limit=1, arch=None, checks=list(DEFAULT_CHECKS), jobs=1,
                           json_path=None, store=False, trigger="manual", broker=False, baseline=None,
                           fail_on_regression=False)
        assert info.value.exit_code == 2 and "COMPAT_ARCH_MEMORY_MB" in capsys.readouterr().err
        settings = get_settings().model_copy(update={"broker_url": "redis://x", "worker_max_memory_mb": 300})
        with pytest.raises(celery_app.ConfigError, match="worker_max_memory_mb"):
            celery_app.celery_config(settings)
    finally:
        get_settings.cache_clear()
