"""The neuron backend's AOTAutograd cache (compile_cache.py): a hit gives the same results and counts as a fresh
compile, a loaded graph still runs the compile check, and every key part (graph, input shapes, device settings, the
backend's source, the entry format, torch's version) misses when it changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters
from torch._inductor import codecache

import neuron_backend
from neuron_backend import NeuronUnsupportedOpError, compile_backend, compile_cache


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # PyTorch reads TORCHINDUCTOR_CACHE_DIR on every lookup (torch/_inductor/runtime/cache_dir_utils.py: cache_dir)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch-cache"))
    torch._dynamo.reset()
    compile_backend.reset()
    counters["aot_autograd"].clear()
    yield
    torch._dynamo.reset()


def _lookups() -> dict[str, int]:
    c = counters["aot_autograd"]
    return {k: c[k] for k in ("autograd_cache_hit", "autograd_cache_miss", "autograd_cache_bypass")}


def _compile_once(fn, *args):
    """One fresh compile and run (Dynamo forgets its in-memory code cache first, as the compile check does)."""
    torch._dynamo.reset()
    compile_backend.reset()
    return torch.compile(fn, backend="neuron", dynamic=False)(*args)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 2)).to("neuron")


def test_a_hit_gives_the_same_outputs_and_counts(dev):
    m = _model()
    x = torch.randn(4, 8).to("neuron")
    runs = []
    for _ in range(2):
        with torch.no_grad():  # the compile check's forward
            out = _compile_once(m, x)
        runs.append((out.cpu(), compile_backend.compile_report()))
    assert _lookups() == {"autograd_cache_hit": 1, "autograd_cache_miss": 1, "autograd_cache_bypass": 0}
    assert torch.equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1] and runs[1][1]["graphs"] == 1  # checked and counted on load as when lowered


def test_training_graphs_give_the_same_gradients_and_counts(dev):
    # PyTorch stores a training graph only once its backward is lowered (lazily, at the first backward); whether it
    # hits or not, the gradients and counts must not move.
    m = _model()
    x = torch.randn(4, 8).to("neuron")
    runs = []
    for _ in range(2):
        m.zero_grad()
        out = _compile_once(m, x)
        out.sum().backward()
        runs.append((out.detach().cpu(), m[0].weight.grad.cpu(), compile_backend.compile_report()))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert runs[0][2] == runs[1][2] and runs[1][2]["graphs"] == 2  # forward + backward


def _erfc_graph(x):
    return x + torch.erfc(torch.arange(4.0, device="neuron"))


def test_a_loaded_graph_still_runs_the_compile_check(dev, monkeypatch: pytest.MonkeyPatch):
    # Pin the backend's key part so the strict run finds the entry the permissive run stored: the check must still
    # refuse the loaded graph (the load is abandoned and the fresh compile raises the same typed error).
    monkeypatch.setattr(compile_cache, "backend_id", lambda: "neuron-test")
    neuron_backend.set_cpu_fallback(True)
    _compile_once(_erfc_graph, torch.ones(4).to("neuron"))
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        _compile_once(_erfc_graph, torch.ones(4).to("neuron"))
    err = neuron_backend.unwrap_error(info.value)
    assert isinstance(err, NeuronUnsupportedOpError) and err.op == "aten::erfc"
    assert _lookups()["autograd_cache_bypass"] == 1  # found, refused by the check on load


def test_a_loaded_graph_counts_its_eager_fallback(dev, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(compile_backend.CONFIG, "disable_fallback_execution", False, raising=False)
    monkeypatch.setattr(compile_cache, "backend_id", lambda: "neuron-test")
    neuron_backend.set_cpu_fallback(True)
    _compile_once(_erfc_graph, torch.ones(4).to("neuron"))
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(NeuronUnsupportedOpError):  # the graph runs op by op, where strict mode names the op
        _compile_once(_erfc_graph, torch.ones(4).to("neuron"))
    assert _lookups()["autograd_cache_hit"] == 1 and compile_backend.compile_report()["eager_fallbacks"] == 1


def _twice(x):
    return x * 2


def _thrice(x):
    return x * 3


def _second_status(first, second) -> str:
    """Compile ``first()`` then ``second()`` (each a fresh compile); the second's cache outcome."""
    first()
    before = dict(_lookups())
    second()
    after = _lookups()
    return next(k.removeprefix("autograd_cache_") for k in after if after[k] != before[k])


def test_same_graph_and_settings_hit(dev):
    x = torch.ones(3).to("neuron")
    assert _second_status(lambda: _compile_once(_twice, x), lambda: _compile_once(_twice, x)) == "hit"


def test_another_graph_misses(dev):
    x = torch.ones(3).to("neuron")
    assert _second_status(lambda: _compile_once(_twice, x), lambda: _compile_once(_thrice, x)) == "miss"


def test_other_input_shapes_miss(dev):
    assert _second_status(lambda: _compile_once(_twice, torch.ones(3).to("neuron")),
                          lambda: _compile_once(_twice, torch.ones(5).to("neuron"))) == "miss"


@pytest.mark.parametrize("change", ["numerics", "strict", "profile", "switch"])
def test_other_device_settings_miss(dev, change: str):
    x = torch.ones(3).to("neuron")
    flip = {"numerics": lambda: neuron_backend.set_numerics(not neuron_backend.numerics_policy() == "bf16_matmul"),
            "strict": lambda: neuron_backend.set_strict(True),
            "profile": lambda: neuron_backend.set_profile("trn3"),
            "switch": lambda: neuron_backend.set_switches({"argmax_device": "native"})}[change]

    def flipped() -> None:
        flip()
        try:
            _compile_once(_twice, x)
        finally:
            neuron_backend.set_switches({})
    assert _second_status(lambda: _compile_once(_twice, x), flipped) == "miss"


def test_another_backend_build_misses(dev, monkeypatch: pytest.MonkeyPatch):
    x = torch.ones(3).to("neuron")
    assert _second_status(
        lambda: _compile_once(_twice, x),
        lambda: (monkeypatch.setattr(compile_cache, "package_digest", lambda: "another build"),
                 _compile_once(_twice, x))) == "miss"


def test_another_entry_format_misses(dev, monkeypatch: pytest.MonkeyPatch):
    x = torch.ones(3).to("neuron")
    assert _second_status(lambda: _compile_once(_twice, x),
                          lambda: (monkeypatch.setattr(compile_cache, "FORMAT", compile_cache.FORMAT + 1),
                                   _compile_once(_twice, x))) == "miss"


def test_another_torch_build_misses(dev, monkeypatch: pytest.MonkeyPatch):
    # PyTorch's own key part: torch_key() hashes torch's source (torch/_inductor/codecache.py), cached per process
    x = torch.ones(3).to("neuron")
    assert _second_status(lambda: _compile_once(_twice, x),
                          lambda: (monkeypatch.setattr(codecache, "torch_key", lambda: b"another torch"),
                                   _compile_once(_twice, x))) == "miss"


def test_torch_switch_turns_the_cache_off(dev, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(torch._functorch.config, "enable_autograd_cache", False)  # TORCHINDUCTOR_AUTOGRAD_CACHE=0
    x = torch.ones(3).to("neuron")
    _compile_once(_twice, x)
    _compile_once(_twice, x)
    assert _lookups() == {"autograd_cache_hit": 0, "autograd_cache_miss": 0, "autograd_cache_bypass": 0}


def test_the_op_list_check_matches_the_graph_check():
    make_fx = torch.fx.experimental.proxy_tensor.make_fx
    gm = make_fx(lambda x: torch.erfc(x).sum() + torch.nonzero(x).sum())(torch.ones(3))
    ops = compile_cache.graph_ops(gm)
    assert ("aten::erfc", "default", (torch.float32,), ((3,),)) in ops
    neuron_backend.set_cpu_fallback(False)
    with pytest.raises(NeuronUnsupportedOpError) as by_graph:
        compile_backend.check_graph(gm)
    with pytest.raises(NeuronUnsupportedOpError) as by_ops:
        compile_backend.check_ops(ops)
    assert (by_graph.value.op, by_graph.value.dtypes, by_graph.value.reason) == (
        by_ops.value.op, by_ops.value.dtypes, by_ops.value.reason)
