"""The trn2 profile's newer facts: fp8 per type and mode, the compiler's integer rejects and their eager switches,
``normal_`` on the CPU, and the SDPA gate (sources: profile_sources/rules.py and observations.json)."""

from __future__ import annotations

import pytest
import torch

import neuron_backend
from neuron_backend import attention
from neuron_backend.errors import NeuronUnsupportedDtypeError, NeuronUnsupportedOpError
from neuron_backend.hardware import observations


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="neuron", dynamic=False)


def _raises_code(fn, code: str, *args) -> None:
    with pytest.raises(Exception) as info:  # noqa: B017 - Dynamo wraps the backend's error (BackendCompilerFailed)
        fn(*args)
    inner = neuron_backend.unwrap_error(info.value)
    assert isinstance(inner, NeuronUnsupportedDtypeError) and f"[{code}]" in str(inner), str(info.value)[:300]


def test_fp8_runs_in_eager_and_only_e4m3fn_is_a_compile_reject_on_trn2() -> None:
    a = torch.full((4, 4), 0.5)
    for fp8 in (torch.float8_e5m2, torch.float8_e4m3fn):  # eager: both run (a software up-cast on real Trn2)
        x = a.to(fp8).to("neuron")
        assert torch.equal((x.float() @ x.float()).cpu(), (a.to(fp8).float() @ a.to(fp8).float()))
    mm = _compiled(lambda x, y: torch.mm(x.to(torch.float32), y.to(torch.float32)))
    e5 = a.to(torch.float8_e5m2).to("neuron")
    assert mm(e5, e5).device.type == "neuron"  # float8_e5m2 compiles (whn09/xpu-perf: 245.50 TFLOPS)
    e4 = a.to(torch.float8_e4m3fn).to("neuron")
    _raises_code(mm, "NCC_EVRF051", e4, e4)


def test_trn3_compiles_e4m3fn() -> None:
    neuron_backend.set_profile("trn3")
    mm = _compiled(lambda x, y: torch.mm(x.to(torch.float32), y.to(torch.float32)))
    e4 = torch.full((2, 2), 0.5).to(torch.float8_e4m3fn).to("neuron")
    assert mm(e4, e4).device.type == "neuron"


def test_integer_matmul_and_scatter_with_compute_are_compile_rejects() -> None:
    i = torch.ones(2, 2, dtype=torch.int32, device="neuron")
    _raises_code(_compiled(lambda x, y: torch.mm(x, y)), "NCC_EVRF035", i, i)
    idx = torch.tensor([0, 1], device="neuron")
    acc = _compiled(lambda x, j, s: x.scatter_add(0, j, s))
    _raises_code(acc, "NCC_EVRF060", torch.zeros(4, dtype=torch.int32, device="neuron"), idx,
                 torch.ones(2, dtype=torch.int32, device="neuron"))
    # float data with integer indices is not a reject: the index is not the scattered operand
    got = acc(torch.zeros(4, device="neuron"), idx, torch.ones(2, device="neuron"))
    assert got.cpu().tolist() == [1.0, 1.0, 0.0, 0.0]
    red = _compiled(lambda x, j, s: x.scatter_reduce(0, j, s, reduce="amax"))
    _raises_code(red, "NCC_EVRF016", torch.zeros(4, dtype=torch.int32, device="neuron"), idx,
                 torch.ones(2, dtype=torch.int32, device="neuron"))


def test_eager_integer_matmul_follows_its_switch() -> None:
    i = torch.ones(2, 2, dtype=torch.int32)
    neuron_backend.reset_fallback_ops()
    assert torch.equal(torch.mm(i.to("neuron"), i.to("neuron")).cpu(), torch.mm(i, i))  # default: CPU fallback
    assert neuron_backend.fallback_ops() == ["aten::mm (Int)"]
    neuron_backend.set_switches({"integer_matmul_eager": "fails"})
    try:
        with pytest.raises(NeuronUnsupportedOpError, match="NCC_EVRF035"):
            torch.mm(i.to("neuron"), i.to("neuron"))
        f = torch.ones(2, 2, device="neuron")
        assert torch.mm(f, f).device.type == "neuron"  # floats are untouched by the switch
    finally:
        neuron_backend.set_switches({})


def test_eager_integer_scatter_add_follows_its_switch() -> None:
    idx = torch.tensor([0, 1])
    x, src = torch.zeros(4, dtype=torch.int32), torch.ones(2, dtype=torch.int32)
    want = x.scatter_add(0, idx, src)
    assert torch.equal(x.to("neuron").scatter_add(0, idx.to("neuron"), src.to("neuron")).cpu(), want)
    neuron_backend.set_switches({"integer_scatter_compute_eager": "fails"})
    try:
        with pytest.raises(NeuronUnsupportedOpError, match="NCC_EVRF060"):
            x.to("neuron").scatter_add(0, idx.to("neuron"), src.to("neuron"))
        fl = torch.zeros(4, device="neuron").scatter_add(0, idx.to("neuron"), torch.ones(2, device="neuron"))
        assert fl.cpu().tolist() == [1.0, 1.0, 0.0, 0.0]  # float data with int64 indices: not the rule
    finally:
        neuron_backend.set_switches({})


def test_normal_falls_back_to_the_cpu() -> None:
    neuron_backend.reset_fallback_ops()
    torch.empty(3, device="neuron").normal_()
    assert "aten::normal_" in neuron_backend.get_fallback_ops()


@pytest.mark.parametrize("q, k, mask, dropout, fused", [
    ((1, 8, 512, 128), (1, 8, 1024, 128), False, 0.0, True),   # prefill that clears the gate
    ((1, 8, 1, 128), (1, 8, 1024, 128), False, 0.0, False),    # decode: L % 512 != 0
    ((1, 8, 512, 256), (1, 8, 512, 256), False, 0.0, False),   # head_dim 256
    ((2, 512, 512, 64), (2, 512, 512, 64), False, 0.0, False),  # B*H = 1024 > 512
    ((1, 8, 512, 128), (1, 8, 512, 128), True, 0.0, False),    # a mask
    ((1, 8, 512, 128), (1, 8, 512, 128), False, 0.1, False),   # dropout
])
def test_the_sdpa_gate(q, k, mask, dropout, fused) -> None:
    assert attention.nki_sdpa_applies(q, k, k, mask, dropout) is fused


def test_the_new_observations_cite_their_sources() -> None:
    ev = observations.load()
    assert {"D_grpo_guideline", "E_xpu_perf_readme"} <= set(ev.sources)
    assert ev.sources["E_xpu_perf_readme"].commit == "cfb6ca5d10b259fa4f121a78fb59e652bb60bafd"
    qwen8b = [o for o in ev.observations if o.source == "D_grpo_guideline"]
    assert len(qwen8b) == 1 and qwen8b[0].outcome_for("generate", "compile", patched=None) == "pass"
    assert {"fp8_e5m2_compiled_matmul", "sdpa_nki_gate", "normal_cpu_fallback"} <= {f.id for f in ev.facts}
