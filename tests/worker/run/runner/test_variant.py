"""``variant``: a re-run's switches and CPU ops are in force inside the block, in the device and in the environment a
child inherits, and afterwards the device is back at what the environment said before (not at its defaults)."""

from __future__ import annotations

import os

import pytest

from worker.run.process.devices import process_device
from worker.run.runner.variant import CPU_OPS_ENV, SWITCHES_ENV, variant


def test_a_variant_is_in_force_inside_and_the_environments_settings_are_back_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dev = process_device("neuron")
    config = dev.backend.config.CONFIG
    monkeypatch.setenv(SWITCHES_ENV, "integer_sort_topk=runs")
    monkeypatch.setenv(CPU_OPS_ENV, "aten::sort, aten::topk")
    dev.backend.set_switches({"integer_sort_topk": "runs"})
    dev.backend.set_cpu_ops({"aten::sort", "aten::topk"})
    try:
        with variant(dev, {"complex_eager": "raises"}, ["aten::_grouped_mm"]):
            assert config.switches == (("complex_eager", "raises"),)
            assert config.cpu_ops == frozenset({"aten::_grouped_mm"})
            assert os.environ[SWITCHES_ENV] == "complex_eager=raises"
            assert os.environ[CPU_OPS_ENV] == "aten::_grouped_mm"
        assert config.switches == (("integer_sort_topk", "runs"),)
        assert config.cpu_ops == frozenset({"aten::sort", "aten::topk"})  # parsed as the device parses it (stripped)
        assert os.environ[SWITCHES_ENV] == "integer_sort_topk=runs"
    finally:
        dev.backend.set_switches({})
        dev.backend.set_cpu_ops(set())
