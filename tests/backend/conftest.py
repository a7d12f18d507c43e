"""Fixtures of the neuron_backend tests: the registered device, and settings restored after every test.

Tests switch numerics, fallback and profile in-process; this puts them back so test order never matters.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import neuron_backend
from neuron_backend.config import CONFIG

# Test modules import ``concurrent_scripts`` from tests/helpers (shared helpers), under any --import-mode.
_HELPERS = str(Path(__file__).parents[1] / "helpers")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)


@pytest.fixture(autouse=True)
def _restore_device_settings():
    saved = (CONFIG.autocast_matmul, CONFIG.cpu_fallback, CONFIG.profile, CONFIG.memory_per_core,
             CONFIG.complex_decompose, CONFIG.fallback_only_for_unimplemented)
    yield
    neuron_backend.set_profile(saved[2])
    neuron_backend.set_numerics(saved[0])
    neuron_backend.set_cpu_fallback(saved[1])
    neuron_backend.set_complex_decompose(saved[4])
    neuron_backend.set_fallback_only_for_unimplemented(saved[5])
    CONFIG.memory_per_core = saved[3]
    neuron_backend.reset_fallback_ops()


@pytest.fixture
def exact_numerics():
    """fp32 numerics: device results must then equal the CPU's (same kernels run on the host)."""
    neuron_backend.set_numerics(False)
    yield
    neuron_backend.set_numerics(True)


@pytest.fixture
def dev() -> torch.device:
    assert neuron_backend.SIMULATED, neuron_backend.NOT_REGISTERED_REASON
    return torch.device("neuron:0")
