"""Device resolution: cpu, the bundled neuron simulation, unknown and unavailable devices."""

from __future__ import annotations

import pytest
import torch

from worker.run.process.devices import DeviceError, device_versions, resolve_device


def test_cpu() -> None:
    d = resolve_device("cpu")
    assert d.torch_device == "cpu" and d.policy == "fp32" and not d.info.simulated
    assert d.info.torch_version == torch.__version__
    assert device_versions(d)["transformers"]


def test_neuron_is_the_bundled_simulation_without_torch_neuronx() -> None:
    d = resolve_device("neuron")
    assert d.info.simulated and d.torch_device == "neuron" and d.compile_backend == "neuron"
    assert torch.zeros(2, device=d.torch_device).device.type == "neuron"
    assert d.policy in ("fp32", "bf16_matmul")


@pytest.mark.parametrize("name", ["foo", "", "cpu:x", "tpu"])
def test_unknown_devices(name: str) -> None:
    with pytest.raises(DeviceError, match="valid devices: neuron, cpu"):
        resolve_device(name)


def test_unavailable_device() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(DeviceError, match="not available"):
        resolve_device("cuda")
