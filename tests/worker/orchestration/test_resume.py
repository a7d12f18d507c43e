"""Run lifecycle end to end: a `compat sweep` whose parent is killed with -9 mid-run leaves its run `interrupted` (on
the next read, and in `compat runs reap`), and `compat sweep --resume` finishes it to `complete` with every result
stored exactly once: what was stored before the kill is neither rerun nor rewritten.

Cheap: the runner is a stand-in (``fake_runner``, no torch in the pool workers); the sweeps are real CLI processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_runner import executions, write_plan
from sqlalchemy import func, select

from compat.results import ArchitectureEntry
from service import queries, runs
from service.models import Result, Run
from service.store import Store
from worker.catalog.catalog import Catalog, write_snapshot

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
ARCHS = ("LlamaForCausalLM", "GPT2LMHeadModel", "MistralForCausalLM")
CHECKS = ("load", "forward", "generate", "train")
# Not a timing assertion: a bound on how long the test waits for a state before it fails saying which.
GIVE_UP_S = 600


def _env(tmp: Path, plan: Path) -> dict[str, str]:
    snapshot = tmp / "snapshot.json"
    write_snapshot(Catalog(source="hub", snapshot_id=None, entries=[
        ArchitectureEntry(name=n, model_type=n.lower(), rank=i) for i, n in enumerate(ARCHS, 1)]),
        snapshot, endpoint="test", limit=len(ARCHS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPAT_", "NEURON_"))}
    return env | {
        "COMPAT_DATABASE_URL": f"sqlite:///{tmp / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp / "var"),
        "COMPAT_CATALOG_SOURCE": "snapshot", "COMPAT_CATALOG_SNAPSHOT": str(snapshot),
        "COMPAT_RUN_HOOK": "fake_runner:run", "FAKE_RUNNER_PLAN": str(plan), "HF_HUB_OFFLINE": "1",
        # The pool's workers are spawned: they find the stand-in runner on the path.
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "helpers")]), "COLUMNS": "200",
    }


def _compat(*args: str, env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cli.app", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _wait_for(what: str, check, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + GIVE_UP_S
    while not check():
        if proc.poll() is not None:
            pytest.fail(f"the sweep exited ({proc.returncode}) before {what}:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.2)


def test_a_sweep_killed_with_sigkill_is_interrupted_then_resumed_to_complete_once(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    first, slow, last = ARCHS
    plan = write_plan(tmp_path / "plan.json", markers, {first: {}, slow: {"sleep_s": 3600}, last: {}})
    env = _env(tmp_path, plan)
    store = Store(env["COMPAT_DATABASE_URL"])

    sweep = _compat("sweep", "--device", "cpu", "--jobs", "1", env=env, start_new_session=True)
    try:
        def first_stored_and_slow_running() -> bool:
            with store.session() as s:
                run = s.scalars(select(Run)).first()
                stored = s.scalar(select(func.count()).select_from(Result)) if run is not None else 0
            return run is not None and run.state == "running" and stored == len(CHECKS) and \
                executions(markers, slow) == 1

        # Provably mid-run: the first architecture's results are stored and the second one is running.
        _wait_for("the first architecture stored and the second running", first_stored_and_slow_running, sweep)
        with store.session() as s:
            run_id = s.scalars(select(Run.id)).one()
            before = {(r.architecture, r.check): (r.id, r.metrics["execution"])
                      for r in s.scalars(select(Result).where(Result.run_id == run_id))}
        os.kill(sweep.pid, signal.SIGKILL)  # the sweep's parent only: it owns the run
        sweep.wait()  # reaped by us, so its pid is gone (not a zombie)
    finally:
        try:
            os.killpg(sweep.pid, signal.SIGKILL)  # then its orphaned pool worker, still sleeping
        except ProcessLookupError:
            pass
    assert len(before) == len(CHECKS) and {a for a, _ in before} == {first}

    # The next read sees it interrupted: the owner's pid is gone on this host.
    with store.session() as s:
        detail = queries.get_run(s, run_id, with_results=False)
    assert detail.state == "interrupted", detail
    assert f"owner process {sweep.pid}" in detail.end_reason and detail.missing == 2 * len(CHECKS)
    with store.session() as s:
        assert runs.latest_run(s, "cpu") is None  # never the headline, nor a baseline
    reap = subprocess.run([sys.executable, "-m", "cli.app", "runs", "reap"], cwd=REPO, env=env,
                          capture_output=True, text=True)
    assert reap.returncode == 0 and "no run lost its owner" in reap.stdout  # already marked by the read

    write_plan(plan, markers, {first: {}, slow: {}, last: {}})  # the slow one is quick this time
    resume = _compat("sweep", "--resume", run_id, "--jobs", "1", "--json", str(tmp_path / "report.json"), env=env)
    out, _ = resume.communicate()
    assert resume.returncode == 0, out
    assert f"resuming run {run_id}: {len(CHECKS)} of {3 * len(CHECKS)} results stored, 2 architecture(s) to run" \
        in out

    with store.session() as s:
        run = s.get(Run, run_id)
        rows = s.scalars(select(Result).where(Result.run_id == run_id)).all()
    assert run.state == "complete" and run.end_reason is None
    keys = [(r.architecture, r.check) for r in rows]
    assert sorted(keys) == sorted((a, c) for a in ARCHS for c in CHECKS)  # every result, exactly once
    # The stored ones were kept as they were (same rows, same execution), and the first one never ran again.
    assert {k: v for k, v in ((k, (r.id, r.metrics["execution"])) for k, r in zip(keys, rows, strict=True))
            if k[0] == first} == before
    assert (executions(markers, first), executions(markers, slow), executions(markers, last)) == (1, 2, 1)
    report = (tmp_path / "report.json").read_text()
    assert '"state": "complete"' in report and '"missing": 0' in report
