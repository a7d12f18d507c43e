"""Registration and tensor plumbing of the neuron device: device module, factories, transfers, autograd, optimizer,
mixed-device errors, host syncs, and the settings/info API the harness reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import neuron_backend
from neuron_backend import registration


def test_registered_as_privateuse1(dev):
    assert neuron_backend.SIMULATED is True
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    # trn2 default: 8 NeuronCore-v3 per chip grouped LNC=2 -> 4 logical NeuronCores (profile hardware)
    assert torch.neuron.is_available() and torch.neuron.device_count() == 4
    assert torch.device("neuron:1").index == 1
    assert registration.register() is True  # idempotent


def test_device_module_api(dev):
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    torch.neuron.set_device(0)
    torch.neuron.synchronize()
    torch.neuron.manual_seed(3)
    a = torch.randn(4, device="neuron")
    torch.neuron.manual_seed(3)
    b = torch.randn(4, device="neuron")
    assert torch.equal(a.cpu(), b.cpu())
    free, total = torch.neuron.mem_get_info()
    assert total == 24 * (1 << 30) and 0 < free <= total  # 96 GiB per Trn2 chip / 4 logical cores
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.neuron.set_device(7)


def test_factories_transfers_and_generated_methods(dev):
    x = torch.arange(6, device="neuron").reshape(2, 3)
    assert x.device == dev and x.is_neuron and not torch.zeros(1).is_neuron
    assert torch.equal(x.cpu(), torch.arange(6).reshape(2, 3))
    y = torch.ones(2, 3).neuron(1)
    assert y.device == torch.device("neuron:1")
    assert torch.eye(3, device="neuron").cpu().trace().item() == 3.0
    assert torch.linspace(0, 1, 5, device="neuron").cpu()[-1].item() == 1.0
    assert torch.full((2,), 7.0, device="neuron").tolist() == [7.0, 7.0]
    assert torch.tensor([1, 2], device="neuron").device == dev
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.device == dev and isinstance(m.weight, torch.nn.Parameter)
    assert "device='neuron:0'" in repr(torch.zeros(1, device="neuron"))


def test_autograd_and_optimizer_step_match_cpu(dev, exact_numerics):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    devm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    devm.load_state_dict(ref.state_dict())
    devm.to("neuron")
    x = torch.randn(5, 8)
    for model, inp in ((ref, x), (devm, x.to("neuron"))):
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        model(inp).pow(2).mean().backward()
        opt.step()
    for p_ref, p_dev in zip(ref.parameters(), devm.parameters(), strict=True):
        assert p_dev.device == dev and p_dev.grad.device == dev
        # exact numerics, same CPU kernels: only AdamW's op order could differ, so 1e-6 is ample
        torch.testing.assert_close(p_dev.detach().cpu(), p_ref.detach(), rtol=1e-6, atol=1e-6)


def test_no_grad_and_inplace_keep_identity(dev):
    x = torch.zeros(3, device="neuron", requires_grad=True)
    with torch.no_grad():
        y = x.add_(1)
    assert y is x and x.cpu().tolist() == [1.0, 1.0, 1.0]
    z = x * 2
    assert z.requires_grad and z.grad_fn is not None


def test_mixed_device_operands_rejected_like_a_real_device(dev):
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="neuron") + torch.ones(3)
    # 0-dim host tensors are scalars, allowed as on CUDA
    assert (torch.ones(3, device="neuron") + torch.tensor(1.0)).device == dev


def test_cores_are_separate_devices(dev):
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        torch.ones(2, device="neuron:0") + torch.ones(2, device="neuron:1")
    assert (torch.ones(2, device="neuron:1") * 2).device == torch.device("neuron:1")



def test_backward_on_a_second_core_lands_its_gradients_there(dev):
    # torch 2.13's Python device guard reports one device, so the autograd engine has one device queue and backward
    # on neuron:1 failed its INTERNAL ASSERT (device_ready_queues_); registration.py turns multithreading off in the
    # importing thread (this one), so every core's backward runs here. An engine failure is a RuntimeError, no abort.
    assert torch._C._is_multithreading_enabled() is False
    x = torch.randn(4, 4, device="neuron:1", requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.device == torch.device("neuron:1") and x.grad.cpu().eq(2).all()
    # a graph across cores (a model split over neuron:0 and neuron:1): each leaf's gradient stays on its core
    w0 = torch.ones(3, device="neuron:0", requires_grad=True)
    w1 = torch.full((3,), 2.0, device="neuron:1", requires_grad=True)
    ((w0 * 3).to("neuron:1") * w1).sum().backward()
    assert w0.grad.device == dev and w0.grad.cpu().tolist() == [6.0, 6.0, 6.0]
    assert w1.grad.device == torch.device("neuron:1") and w1.grad.cpu().tolist() == [3.0, 3.0, 3.0]

def test_torch_save_loads_as_host_tensors_and_deepcopy_stays_on_device(dev, tmp_path):
    import copy

    m = torch.nn.Linear(3, 3).to("neuron")
    torch.save(m.state_dict(), tmp_path / "sd.pt")
    sd = torch.load(tmp_path / "sd.pt")  # weights_only=True default: no custom class in the file
    assert all(v.device.type == "cpu" for v in sd.values())
    assert torch.equal(sd["weight"], m.weight.detach().cpu())
    twin = copy.deepcopy(m)
    assert twin.weight.device == dev and twin.weight is not m.weight
    assert torch.equal(twin.weight.detach().cpu(), m.weight.detach().cpu())


def test_host_syncs_are_counted(dev):
    before = neuron_backend.host_syncs()
    x = torch.ones(2, device="neuron")
    _ = x.sum().item()
    assert bool(x.all())
    assert neuron_backend.host_syncs() == before + 2


def test_numpy_refused_like_cuda(dev):
    with pytest.raises(TypeError, match="neuron"):
        torch.ones(2, device="neuron").numpy()


def test_device_info_and_switches(dev):
    info = neuron_backend.device_info()
    assert info["name"] == "neuron" and info["simulated"] is True
    assert info["profile"] == "trn2" and info["cores"] == 4 and info["lnc"] == 2
    assert (info["generation"], info["neuroncore"]) == ("Trn2", "NeuronCore-v3")
    assert info["memory_per_core"] == 24 * (1 << 30) and info["backend_version"]
    assert info["cpu_fallback"] is True and info["strict"] is False and info["complex_decompose"] is True
    assert info["policy"] == neuron_backend.numerics_policy() == "bf16_matmul"
    neuron_backend.set_numerics(False)
    assert neuron_backend.numerics_policy() == "fp32"
    with pytest.raises(ValueError, match="unknown NEURON_PROFILE"):
        neuron_backend.set_profile("no-such-profile")


def test_env_config_is_validated(monkeypatch):
    from neuron_backend import config

    monkeypatch.setenv("NEURON_CORES", "4")
    monkeypatch.setenv("NEURON_MEMORY_GB", "0.5")
    monkeypatch.setenv("NEURON_AUTOCAST_MATMUL", "0")
    cfg = config.load()
    assert (cfg.cores, cfg.memory_per_core, cfg.autocast_matmul) == (4, 1 << 29, False)
    monkeypatch.setenv("NEURON_CPU_FALLBACK", "maybe")
    with pytest.raises(ValueError, match="NEURON_CPU_FALLBACK"):
        config.load()
    monkeypatch.delenv("NEURON_CPU_FALLBACK")
    monkeypatch.setenv("NEURON_PROFILE", "no-such-profile")
    with pytest.raises(ValueError, match="unknown NEURON_PROFILE"):
        config.load()


@pytest.mark.parametrize(("profile", "lnc", "cores", "gib"), [
    ("trn2", "", 4, 24), ("trn2", "1", 8, 12), ("trn3", "", 4, 36), ("trn3", "1", 8, 18)])
def test_hardware_per_generation_and_lnc(monkeypatch, profile, lnc, cores, gib):
    # Trn2: 8 x NC-v3, 96 GiB per chip; Trn3: 8 x NC-v4, 144 GiB per chip (sources in the profiles' hardware entry).
    from neuron_backend import config

    for name in ("NEURON_CORES", "NEURON_MEMORY_GB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NEURON_PROFILE", profile)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    cfg = config.load()
    assert (cfg.cores, cfg.memory_per_core) == (cores, gib << 30)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "3")
    with pytest.raises(ValueError, match="LNC degree must divide"):
        config.load()


def test_strict_and_real_env_names(monkeypatch):
    from neuron_backend import config

    for name in ("NEURON_CPU_FALLBACK", "NEURON_STRICT", "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS",
                 "TORCH_NEURONX_COMPLEX_DECOMPOSE", "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"):
        monkeypatch.delenv(name, raising=False)
    cfg = config.load()
    assert cfg.cpu_fallback and not cfg.fallback_only_for_unimplemented
    assert cfg.complex_decompose and cfg.disable_fallback_execution
    monkeypatch.setenv("NEURON_STRICT", "1")
    assert config.load().cpu_fallback is False
    monkeypatch.delenv("NEURON_STRICT")
    monkeypatch.setenv("NEURON_CPU_FALLBACK", "0")
    monkeypatch.setenv("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "1")
    monkeypatch.setenv("TORCH_NEURONX_COMPLEX_DECOMPOSE", "0")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    cfg = config.load()
    assert not cfg.cpu_fallback and cfg.fallback_only_for_unimplemented
    assert not cfg.complex_decompose and not cfg.disable_fallback_execution


def test_never_shadows_a_real_torch_neuronx(monkeypatch):
    """A torch_neuronx package on sys.path, or a real one imported, makes the simulation stand aside; its own
    stand-in module (simulated_torch_neuronx) does not. The installed-distribution case: test_autoload.py."""
    import importlib.machinery
    import types

    assert registration.real_neuron_present() is None  # the simulation's torch_neuronx is in sys.modules here
    real_find_spec = importlib.machinery.PathFinder.find_spec
    monkeypatch.setattr(importlib.machinery.PathFinder, "find_spec",
                        lambda name, *a: object() if name == "torch_neuronx" else real_find_spec(name, *a))
    assert "torch_neuronx package is on sys.path" in registration.real_neuron_present()
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "torch_neuronx", types.ModuleType("torch_neuronx"))
    assert "torch_neuronx module is imported" in registration.real_neuron_present()


def test_a_fresh_process_registers_and_reports(tmp_path):
    import subprocess
    import sys

    code = ("import torch, neuron_backend as nb; x = torch.ones(2, device='neuron:1');"
            "print(nb.SIMULATED, x.device, nb.device_info()['cores'], nb.numerics_policy())")
    env = {"NEURON_CORES": "3", "NEURON_AUTOCAST_MATMUL": "0", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(neuron_backend.__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "neuron:1", "3", "fp32"]


def test_version_is_exposed_for_the_harness():
    assert neuron_backend.__version__ == neuron_backend.device_info()["backend_version"]


def test_device_properties_name_the_device_and_its_memory(dev):
    # TRL reads torch.neuron.get_device_properties(0).name whenever a trainer is built on neuron.
    props = torch.neuron.get_device_properties(0)
    assert props.name == torch.neuron.get_device_name(0)
    assert props.total_memory == neuron_backend.config.CONFIG.memory_per_core > 0


def test_pin_memory_for_the_device_gives_a_host_copy(dev):
    # Trainer's data loader pins batches for the accelerator by default (the real backend has a pinned allocator).
    t = torch.arange(6).reshape(2, 3)
    pinned = t.pin_memory(dev.type)
    assert pinned.device.type == "cpu" and torch.equal(pinned, t) and pinned.data_ptr() != t.data_ptr()
    assert torch.equal(t.pin_memory(), t)  # the current accelerator is neuron in this process
