"""Warm rank pairs of the fsdp/tp checks (worker/run/group.py): reused across architectures only after a job both
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
from worker.run import group
from worker.run.reference import prepare_reference


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    out = {}
    for name in ("LlamaForCausalLM", "GPT2LMHeadModel"):
        entry = next(e for e in registry_entries() if e.name == name)
        b = build_checkpoint(entry, tmp_path_factory.mktemp(name), seed=0)
        out[name] = (b.path, prepare_reference(b.path, "fp32", 0).inputs)
    yield out
    group.close_pairs()


def _run(built: dict, name: str, warm: bool) -> group.GroupRun:
    path, inputs = built[name]
    return group.run_group(name, path, "cpu", ["fsdp", "tp"], inputs, seed=0, deadline_s=240, group_timeout_s=60,
                           warm=warm)


def _values(run: group.GroupRun) -> list[dict]:
    assert run.returncodes == [0, 0], run.describe()
    return [{c: r[c]["value"] for c in ("fsdp", "tp")} for r in run.results]


def _same(a: list[dict], b: list[dict]) -> None:
    for ra, rb in zip(a, b, strict=True):
        for check in ("fsdp", "tp"):
            for key, value in ra[check].items():
                if isinstance(value, torch.Tensor):
                    assert torch.equal(value, rb[check][key]), (check, key)  # same ranks' work: bitwise
                else:
                    assert value == rb[check][key], (check, key)


def _gone(pids: list[int]) -> bool:
    time.sleep(0.2)
    return all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in pids)


def test_a_warm_pair_serves_the_next_architecture_with_fresh_rank_results(built) -> None:
    group.close_pairs()
    cold = _run(built, "LlamaForCausalLM", warm=False)
    first = _run(built, "LlamaForCausalLM", warm=True)
    second = _run(built, "LlamaForCausalLM", warm=True)
    assert second.pids == first.pids and first.pids != cold.pids  # the pair stayed up between the jobs
    assert all(psutil.pid_exists(p) for p in second.pids) and _gone(cold.pids)
    _same(_values(cold), _values(first))
    _same(_values(cold), _values(second))
    assert "[rank 1] tp: ok" in second.logs[1] and "fsdp" not in second.logs[1].split("init group")[0]  # its own log


def test_a_failed_job_replaces_the_pair(built) -> None:
    group.close_pairs()
    before = _run(built, "LlamaForCausalLM", warm=True)
    failed = _run(built, "GPT2LMHeadModel", warm=True)  # no tp plan: tp raises on both ranks, which exit 3
    assert failed.pids == before.pids
    assert failed.returncodes == [3, 3] and not failed.timed_out, failed.describe()
    assert all(failed.results[r]["tp"]["status"] != "ok" for r in range(2))
    assert _gone(failed.pids)  # nothing of the failed architecture's processes is left
    after = _run(built, "LlamaForCausalLM", warm=True)
    assert set(after.pids).isdisjoint(failed.pids)
    _same(_values(before), _values(after))


def test_a_pair_is_retired_after_its_job_quota(built, monkeypatch) -> None:
    group.close_pairs()
    monkeypatch.setattr(group, "WARM_JOBS", 2)
    one = _run(built, "LlamaForCausalLM", warm=True)
    two = _run(built, "LlamaForCausalLM", warm=True)
    assert one.pids == two.pids and _gone(two.pids)  # its second job was its last
    three = _run(built, "LlamaForCausalLM", warm=True)
    assert set(three.pids).isdisjoint(two.pids)
    _values(three)


def test_a_job_past_its_deadline_kills_the_pair(built) -> None:
    group.close_pairs()
    path, inputs = built["LlamaForCausalLM"]
    late = group.run_group("LlamaForCausalLM", path, "cpu", ["fsdp", "tp"], inputs, seed=0, deadline_s=0.2,
                           group_timeout_s=60, warm=True)
    assert late.timed_out and late.killed == [0, 1] and _gone(late.pids)
    after = _run(built, "LlamaForCausalLM", warm=True)
    assert set(after.pids).isdisjoint(late.pids)
    _values(after)
