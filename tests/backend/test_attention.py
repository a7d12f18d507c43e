"""The device's composite scaled_dot_product_attention replayed on the host data (neuron_backend/attention.py).

Each structure is run twice op by op (the replay disabled) and twice with the replay: results, device memory and the
ops record must be the same, and the second replayed call must reach no device op at all.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import neuron_backend
from neuron_backend import attention, dispatch, policy


def _inputs(dtype, mask_kind, heads_kv=4, q_len=6, kv_len=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 4, q_len, 8, generator=g).to(dtype)
    k = torch.randn(2, heads_kv, kv_len, 8, generator=g).to(dtype)
    v = torch.randn(2, heads_kv, kv_len, 8, generator=g).to(dtype)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(2, 1, q_len, kv_len, generator=g) > 0.3
        mask[..., 0] = True
    elif mask_kind == "float":
        mask = torch.randn(2, 1, q_len, kv_len, generator=g).to(dtype)
    return q, k, v, mask


# (dtype, mask, causal, kv heads, q length, kv length, scale): GQA, masks of both kinds, a causal mask over
# q_len != kv_len (the decode-step shape), an explicit scale, and bf16, whose lowering upcasts to fp32 with _to_copy
# ops the replay does not know: that structure must stay op by op (REPLAYED false).
CASES = {
    "causal-gqa-fp32": (torch.float32, None, True, 2, 6, 6, None),
    "bool-mask": (torch.float32, "bool", False, 4, 6, 6, None),
    "float-mask-scale": (torch.float32, "float", False, 4, 6, 6, 0.3),
    "causal-short-query": (torch.float32, None, True, 4, 2, 7, None),
    "decode-step-bool-gqa": (torch.float32, "bool", False, 2, 1, 9, None),
    "causal-bf16": (torch.bfloat16, None, True, 4, 6, 6, None),
}
REPLAYED = {name: name != "causal-bf16" for name in CASES}


def _run(dev, case, replay: bool, monkeypatch) -> dict:
    """Two calls of one structure on fresh device state; what a user and the harness can observe of them."""
    dtype, mask_kind, causal, heads_kv, q_len, kv_len, scale = case
    with monkeypatch.context() as m:
        if not replay:
            m.setattr(attention, "_structure", lambda *a: None)
        neuron_backend.clear_op_tracking()  # also forgets the plans: each run starts from the first call
        outs, device_ops = [], []
        for seed in (0, 1):
            q, k, v, mask = (t.to(dev) if t is not None else None for t in _inputs(dtype, mask_kind, heads_kv,
                                                                                    q_len, kv_len, seed))
            torch.neuron.synchronize()
            base = torch.neuron.memory_allocated(0)
            torch.neuron.reset_peak_memory_stats(0)
            seen: list = []
            with attention.recording(seen):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                                     enable_gqa=heads_kv != 4)
            outs.append(out.cpu())
            device_ops.append(len(seen))
            peak = torch.neuron.max_memory_allocated(0) - base
            held = torch.neuron.memory_allocated(0) - base
            del out
        return {"outs": outs, "device_ops": device_ops, "peak": peak, "held": held,
                "executed": neuron_backend.get_executed_ops(), "fallback": neuron_backend.fallback_ops()}


@pytest.mark.parametrize("name", list(CASES))
def test_replay_is_the_op_by_op_run(dev, name, monkeypatch):
    by_op = _run(dev, CASES[name], False, monkeypatch)
    replayed = _run(dev, CASES[name], True, monkeypatch)
    for a, b in zip(by_op["outs"], replayed["outs"], strict=True):
        assert torch.equal(a, b)  # bitwise: the same host kernels on the same data, in the same order
    assert replayed["peak"] == by_op["peak"] and replayed["held"] == by_op["held"]
    assert replayed["executed"] == by_op["executed"] and replayed["fallback"] == by_op["fallback"] == []
    # The first call goes op by op through the device (and vouches for the plan); the second is the replay.
    assert by_op["device_ops"][0] == by_op["device_ops"][1] > 20
    second = 0 if REPLAYED[name] else by_op["device_ops"][0]
    assert replayed["device_ops"] == [by_op["device_ops"][0], second]


def test_fallback_in_the_lowering_keeps_the_structure_op_by_op(dev, monkeypatch):
    """If any op of the lowering is not run natively (here tril falls back to the CPU), every call goes op by op,
    recording the fallback each time as the device does."""
    decide = policy.decide

    def tril_falls_back(func, dtypes, args=(), kwargs=None):
        return policy.FALLBACK if func is torch.ops.aten.tril.default else decide(func, dtypes, args, kwargs)

    monkeypatch.setattr(policy, "decide", tril_falls_back)
    dispatch.clear_cache()
    try:
        with pytest.warns(UserWarning, match="aten::tril"):
            result = _run(dev, CASES["causal-gqa-fp32"], True, monkeypatch)
    finally:
        monkeypatch.undo()
        dispatch.clear_cache()
    assert result["device_ops"][0] == result["device_ops"][1] > 20
    assert any(e.startswith("aten::tril") for e in result["fallback"])


def test_another_profile_decides_again(dev, monkeypatch):
    """Plans are derived from the decisions: a profile switch forgets them, so the next call is op by op again."""
    q, k, v, _ = (t.to(dev) if t is not None else None for t in _inputs(torch.float32, None))
    for _ in range(2):
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert any(attention._plans.values())
    neuron_backend.set_profile(neuron_backend.device_info()["profile"])
    assert attention._plans == {}


def test_grad_and_dropout_are_not_replayed(dev):
    q, k, v = (t.to(dev) for t in _inputs(torch.float32, None)[:3])
    seen: list = []
    for _ in range(2):
        with attention.recording(seen):
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        assert seen, "dropout: op by op on every call"
        seen.clear()
    qg = q.detach().requires_grad_()
    for _ in range(2):
        with attention.recording(seen):
            F.scaled_dot_product_attention(qg, k, v, is_causal=True).sum().backward()
        assert seen, "autograd: the decomposition's backward needs the device ops"
        seen.clear()
