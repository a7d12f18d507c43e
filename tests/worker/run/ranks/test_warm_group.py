"""Warm rank pairs of the fsdp/tp checks (worker/run/ranks/group.py): reused across architectures only after a job both
ranks finished, replaced after anything else, and giving the results fresh ranks give.

On cpu (gloo), with tiny Llama (both checks pass) and GPT-2 (no tp plan: tp fails on both ranks).
"""

from __future__ import annotations

import time

import psutil
import pytest
import torch

from worker.build.build import build_checkpoint
from worker.catalog.catalog import registry_entries
from worker.run.process import pool
from worker.run.ranks import group
from worker.run.reference.reference import prepare_reference


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    out = {}
    for name in ("LlamaForCausalLM", "GPT2LMHeadModel"):
        entry = next(e for e in registry_entries() if e.name == name)
        b = build_checkpoint(entry, tmp_path_factory.mktemp(name), seed=0)
        out[name] = (b.path, prepare_reference(b.path, "fp32", 0).inputs)
    yield out
    group.close_pairs()


def _run(built: dict, name: str, warm: bool, checks: tuple[str, ...] = ("fsdp", "tp"),
         deadline_s: float = 240) -> group.GroupRun:
    path, inputs = built[name]
    return group.run_group(name, path, "cpu", list(checks), inputs, seed=0, deadline_s=deadline_s, group_timeout_s=60,
                           warm=warm)


def _values(run: group.GroupRun) -> list[dict]:
    assert run.returncodes == [0, 0], run.describe()
    return [{c: v["value"] for c, v in r.items()} for r in run.results]


def _same(a: list[dict], b: list[dict]) -> None:
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for check in ra:
            for key, value in ra[check].items():
                if isinstance(value, torch.Tensor):
                    assert torch.equal(value, rb[check][key]), (check, key)  # same ranks' work: bitwise
                else:
                    assert value == rb[check][key], (check, key)


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _gone(pids: list[int], within_s: float = 30) -> bool:
    """Whether every pid is dead (gone or a zombie) within ``within_s``: a SIGKILLed process can take a moment to
    die on a busy machine (a fixed 0.2 s wait was a race under pytest -n 2); a live one still fails."""
    end = time.monotonic() + within_s
    while not all(_dead(p) for p in pids):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_a_warm_pair_serves_the_next_architecture_with_fresh_rank_results(built, monkeypatch) -> None:
    group.close_pairs()
    monkeypatch.setattr(group, "WARM_JOBS", 2)
    cold = _run(built, "LlamaForCausalLM", warm=False)
    first = _run(built, "LlamaForCausalLM", warm=True)
    assert all(psutil.pid_exists(p) for p in first.pids) and _gone(cold.pids)
    # Waiting for the next job, the ranks name themselves idle: the pool's memory watch leaves them out.
    assert [psutil.Process(p).name() for p in first.pids] == [pool.IDLE_PROCESS_NAME] * 2
    second = _run(built, "LlamaForCausalLM", warm=True)
    assert second.pids == first.pids and first.pids != cold.pids  # the pair stayed up between the jobs
    _same(_values(cold), _values(first))
    _same(_values(cold), _values(second))
    assert "[rank 1] tp: ok" in second.logs[1] and second.logs[1].count("init group") == 1  # its own job's log
    assert _gone(second.pids)  # WARM_JOBS reached: retired after its second job


def test_a_failed_or_late_job_replaces_the_pair(built) -> None:
    group.close_pairs()
    before = _run(built, "LlamaForCausalLM", warm=True, checks=("fsdp",))
    failed = _run(built, "GPT2LMHeadModel", warm=True, checks=("tp",))  # no tp plan: raises on both ranks (exit 3)
    assert failed.pids == before.pids
    assert failed.returncodes == [3, 3] and not failed.timed_out, failed.describe()
    assert all(failed.results[r]["tp"]["status"] != "ok" for r in range(2))
    assert _gone(failed.pids)  # nothing of the failed architecture's processes is left
    late = _run(built, "LlamaForCausalLM", warm=True, checks=("fsdp",), deadline_s=0.2)
    assert set(late.pids).isdisjoint(failed.pids)
    assert late.timed_out and late.killed == [0, 1] and _gone(late.pids)
    after = _run(built, "LlamaForCausalLM", warm=True, checks=("fsdp",))
    assert set(after.pids).isdisjoint(late.pids)
    _same(_values(before), _values(after))


def test_ranks_see_the_launchers_environment_at_launch_not_an_older_one(built, monkeypatch) -> None:
    # The forkserver keeps the environment of its start, a warm pair that of its own: a variable set afterwards (a
    # block's NEURON_SWITCHES under --jobs 0, a test module's device settings) must still reach the ranks. Under
    # pytest -n 2 a forkserver started by an earlier module's cpu group left tiny Mixtral's neuron tp ranks without
    # tests/worker/run/checks/test_finetune_checks.py's switches (aten::sort unsupported_op instead of pass).
    group.close_pairs()
    path, inputs = built["LlamaForCausalLM"]
    before = group.run_group("LlamaForCausalLM", path, "neuron", ["fsdp"], inputs, seed=0, deadline_s=240,
                             group_timeout_s=60, warm=True)
    assert before.returncodes == [0, 0], before.describe()
    # A bad op name: a neuron rank that reads it fails at `import neuron_backend`, naming the variable.
    monkeypatch.setenv("NEURON_CPU_OPS", "sort")
    for warm in (True, False):
        run = group.run_group("LlamaForCausalLM", path, "neuron", ["fsdp"], inputs, seed=0, deadline_s=240,
                              group_timeout_s=60, warm=warm)
        assert set(run.pids).isdisjoint(before.pids), warm  # the older pair was not asked to run it
        assert all(code != 0 for code in run.returncodes), (warm, run.describe())
        assert all("NEURON_CPU_OPS: sort: expected op names" in log for log in run.logs), (warm, run.describe())
    monkeypatch.delenv("NEURON_CPU_OPS")  # and a variable unset since is gone from the next ranks too
    after = group.run_group("LlamaForCausalLM", path, "neuron", ["fsdp"], inputs, seed=0, deadline_s=240,
                            group_timeout_s=60, warm=True)
    assert after.returncodes == [0, 0], after.describe()
    group.close_pairs()
