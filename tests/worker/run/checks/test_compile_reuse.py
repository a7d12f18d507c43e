"""The compile check with the neuron backend's AOTAutograd cache (issue 20): two architectures compiled one after the
other in one process, from a cold cache and again from a warm one, give the same records as each compiled alone
without the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

from compat.results import ArchitectureEntry, Check, ResultRecord
from worker.build.build import build_checkpoint
from worker.run.checks.checks import CheckContext, run_check
from worker.run.process.devices import process_device
from worker.run.reference.reference import Reference, prepare_reference

ARCHS = (ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1),
         ArchitectureEntry(name="GPT2LMHeadModel", model_type="gpt2", rank=2))


@pytest.fixture(scope="module")
def refs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Reference]:
    device = process_device("neuron")
    out = {}
    for entry in ARCHS:
        path = build_checkpoint(entry, tmp_path_factory.mktemp("ckpt") / entry.name, seed=0).path
        out[entry.name] = prepare_reference(path, device.policy, 0, cache=None)
    return out


def _compile_record(name: str, ref: Reference) -> ResultRecord:
    ctx = CheckContext(name, 1, process_device("neuron"), ref, checks=(Check.LOAD, Check.COMPILE))
    assert run_check(ctx, Check.LOAD).status == "pass"
    return run_check(ctx, Check.COMPILE)


def _verdict(rec: ResultRecord) -> tuple:
    """What the cache must not move: everything but the timing and the peak memory (which varies run to run)."""
    return rec.status, rec.metrics, rec.fallback_ops, rec.reason, rec.blocking_op, rec.error


def test_reuse_keeps_the_compile_records(refs: dict[str, Reference], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch-cache"))
    with monkeypatch.context() as off:
        off.setattr(torch._functorch.config, "enable_autograd_cache", False)  # TORCHINDUCTOR_AUTOGRAD_CACHE=0
        alone = {name: _verdict(_compile_record(name, ref)) for name, ref in refs.items()}
    counters["aot_autograd"].clear()
    cold = {name: _verdict(_compile_record(name, ref)) for name, ref in refs.items()}  # one process, one after other
    assert counters["aot_autograd"]["autograd_cache_miss"] == 2 and counters["aot_autograd"]["autograd_cache_saved"] == 2
    warm = {name: _verdict(_compile_record(name, ref)) for name, ref in refs.items()}
    assert counters["aot_autograd"]["autograd_cache_hit"] == 2
    assert alone["LlamaForCausalLM"][0] == "pass" and alone["GPT2LMHeadModel"][0] == "pass"
    assert cold == alone and warm == alone
