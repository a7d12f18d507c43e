"""`compat sweep --strict`: the sweep's workers run with NEURON_CPU_FALLBACK=0 (no op may fall back to the CPU);
refused with --broker, whose workers are configured on the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_runner import write_plan
from typer.testing import CliRunner

from cli.app import app
from compat.settings import get_settings
from service.store import Store

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_RUN_HOOK": "fake_runner:run", "FAKE_RUNNER_PLAN": str(tmp_path / "plan.json"),
                 "NEURON_CPU_FALLBACK": "1", "COLUMNS": "200"}.items():
        monkeypatch.setenv(k, v)  # restored after the test, whatever --strict set
    write_plan(tmp_path / "plan.json", tmp_path / "markers", {})
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_strict_sweeps_with_cpu_fallback_off(env: Path) -> None:
    res = runner.invoke(app, ["sweep", "--strict", "--device", "cpu", "--jobs", "0", "--source", "registry",
                              "--arch", "LlamaForCausalLM"])
    assert res.exit_code == 0, res.output
    recs = Store().latest_results("LlamaForCausalLM", "cpu")
    assert recs and {r.metrics["cpu_fallback_env"] for r in recs} == {"0"}


def test_strict_is_refused_with_the_broker(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPAT_BROKER_URL", "redis://127.0.0.1:1/0")
    get_settings.cache_clear()
    res = runner.invoke(app, ["sweep", "--strict", "--broker", "--device", "cpu"])
    assert res.exit_code == 2 and "set it on the cluster's workers" in res.output
