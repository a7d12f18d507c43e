"""A package missing from the harness's environment is ``harness_error`` naming it, never ``reference_fail`` nor a
device failure (issue 30 item 4): wherever Transformers' "requires the X library" ImportError is raised (the
build, the CPU reference, the device's check), with the package simulated missing through Transformers' own
backend table, so the real ``requires_backends`` raises its real message."""

from __future__ import annotations

import pytest
from transformers.models.gpt2 import modeling_gpt2
from transformers.utils import import_utils

from compat.results import ArchitectureEntry, Check, Status
from worker.catalog.catalog import registry_entries
from worker.judge.attribution import missing_package
from worker.run.checks import checks
from worker.run.process.devices import resolve_device
from worker.run.runner import runner

GPT2 = ArchitectureEntry(name="GPT2LMHeadModel", model_type="gpt2", rank=1)
CHECKS = (Check.LOAD, Check.FORWARD, Check.GENERATE)


def _pretend_missing(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """Transformers' ``requires_backends`` reads availability from BACKENDS_MAPPING: report ``backend`` absent."""
    _available, message = import_utils.BACKENDS_MAPPING[backend]
    monkeypatch.setitem(import_utils.BACKENDS_MAPPING, backend, (lambda: False, message))


def test_transformers_requires_message_names_the_package_and_its_pip_name(monkeypatch: pytest.MonkeyPatch
                                                                          ) -> None:
    _pretend_missing(monkeypatch, "vision")
    with pytest.raises(ImportError) as raised:
        import_utils.requires_backends(type("TimmWrapperModel", (), {}), ["vision"])
    assert "TimmWrapperModel requires the PIL library" in str(raised.value)  # Transformers' own text
    assert missing_package(raised.value) == "PIL (pip install pillow)"
    try:
        raise RuntimeError("wrapped") from ModuleNotFoundError("No module named 'einops'", name="einops")
    except RuntimeError as exc:
        assert missing_package(exc) == "einops"
    assert missing_package(RuntimeError("no import involved")) is None


def test_a_build_that_lacks_a_package_is_a_harness_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Gemma3n's vision tower is TimmWrapperModel, whose __init__ calls requires_backends(self, ["vision", "timm"]).
    _pretend_missing(monkeypatch, "vision")
    gemma3n = next(e for e in registry_entries() if e.name == "Gemma3nForConditionalGeneration")
    recs = runner.run_architecture(gemma3n, resolve_device("cpu"), CHECKS)
    assert [r.status for r in recs] == [Status.HARNESS_ERROR] * len(CHECKS)
    assert recs[0].reason.startswith("missing package PIL (pip install pillow)")


def test_a_reference_that_lacks_a_package_is_a_harness_error_not_reference_fail(monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    _pretend_missing(monkeypatch, "timm")
    forward = modeling_gpt2.GPT2Model.forward

    def needs_timm(self: object, *args: object, **kwargs: object) -> object:
        import_utils.requires_backends(self, ["timm"])
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(modeling_gpt2.GPT2Model, "forward", needs_timm)
    recs = runner.run_architecture(GPT2, resolve_device("cpu"), CHECKS)
    assert [r.status for r in recs] == [Status.HARNESS_ERROR] * len(CHECKS)
    assert recs[0].reason.startswith("missing package timm (pip install timm)")
    assert "GPT2Model requires the timm library" in recs[0].reason


def test_a_device_check_that_lacks_a_package_is_a_harness_error_not_the_devices(monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    # The reference passed; only the device side of the forward check needs the package.
    _pretend_missing(monkeypatch, "timm")

    def device_forward(*_: object, **__: object) -> object:
        import_utils.requires_backends(type("DeviceKernel", (), {}), ["timm"])

    monkeypatch.setattr(checks, "forward_logits", device_forward)
    recs = {r.check: r for r in runner.run_architecture(GPT2, resolve_device("cpu"), CHECKS)}
    assert recs[Check.LOAD].status == Status.PASS and recs[Check.GENERATE].status == Status.PASS
    assert recs[Check.FORWARD].status == Status.HARNESS_ERROR
    assert recs[Check.FORWARD].reason.startswith("missing package timm (pip install timm)")
    assert recs[Check.FORWARD].blocking_op is None
