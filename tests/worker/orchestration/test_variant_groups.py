"""An architecture's re-runs under several device variants share one task (one build, one CPU reference), each
variant's checks run with its own settings in force, and a worker that dies loses only the variant it was running:
the ones it never began run again alone (worker/orchestration/variants.py, run_architecture's ``settings``)."""

from __future__ import annotations

import pytest

from compat.results import ArchitectureEntry, Check, Status
from compat.settings import get_settings
from worker.orchestration.variants import VariantRunner, VariantTask
from worker.run.process.devices import resolve_device
from worker.run.runner.variant import run_variants

CHECKS = [Check.LOAD, Check.FORWARD]


@pytest.fixture
def echo_hook(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COMPAT_RUN_HOOK", "switch_echo_runner:run")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_a_dead_worker_loses_only_the_variant_it_was_running(echo_hook) -> None:
    entry = ArchitectureEntry(name="Fake", model_type="fake", rank=1)
    tasks = [VariantTask("sort", entry, switches={"integer_sort_topk": "runs"}),
             VariantTask("complex", entry, switches={"complex_eager": "raises"}),  # the stand-in dies here
             VariantTask("gmm", entry, switches={"grouped_mm_preconditions": "not_enforced"})]
    seen: list[str] = []
    with VariantRunner(resolve_device("neuron"), jobs=1) as vr:
        got = vr.run(tasks, CHECKS, progress=lambda key, done, total: seen.append(f"{key} {done}/{total}"))
    # Each variant ran with its own switches in force, none with another's.
    assert [r.reason for r in got["sort"]] == ["integer_sort_topk=runs"] * 2
    assert [r.reason for r in got["gmm"]] == ["grouped_mm_preconditions=not_enforced"] * 2
    assert all(r.status == Status.PASS for r in got["sort"] + got["gmm"])
    # The crash is the variant's own (in its load check, the rest skipped), as a task of its own would record it.
    assert [(r.check, r.status) for r in got["complex"]] == [(Check.LOAD, Status.CRASH),
                                                              (Check.FORWARD, Status.SKIPPED)]
    # The variant after it never began in that worker: it ran again alone, in the replacement worker.
    assert got["sort"][0].metrics["pid"] != got["gmm"][0].metrics["pid"]
    assert seen == ["sort 1/3", "complex 2/3", "gmm 3/3"]


def test_one_build_and_reference_serve_every_variant_and_a_bad_one_fails_alone() -> None:
    # The real runner, in this process: a tiny GPT-2 under three variants.
    entry = ArchitectureEntry(name="GPT2LMHeadModel", model_type="gpt2", rank=1)
    events: list[tuple[str, object]] = []
    got = run_variants(entry, resolve_device("neuron"), CHECKS,
                       [("addmm on the cpu", None, ("aten::addmm",)),
                        ("bad option", {"integer_sort_topk": "nope"}, None),  # its settings cannot be set
                        ("plain", None, None)],
                       emit=lambda kind, payload: events.append((kind, payload)))
    phases = [p for k, p in events if k == "phase"]
    assert phases.count("build") == 1 and phases.count("reference") == 1
    assert [p for k, p in events if k == "setting"] == ["addmm on the cpu", "bad option", "plain"]
    cpu, bad, plain = got["addmm on the cpu"], got["bad option"], got["plain"]
    assert [r.status for r in cpu] == [Status.PASS] * 2 and [r.status for r in plain] == [Status.PASS] * 2
    # The ops a variant moves to the CPU fallback are its own: the next variant runs them on the device again.
    assert any(op.startswith("aten::addmm") for op in cpu[1].fallback_ops)
    assert not any(op.startswith("aten::addmm") for op in plain[1].fallback_ops)
    # A variant whose settings fail is the harness's error, and only its own.
    assert [r.status for r in bad] == [Status.HARNESS_ERROR] * 2
    assert "nope" in bad[0].error.message
