"""The sweep's JSON report while the run goes on: rewritten as architectures end, at most every ``JSON_EVERY_S``
(the store has each record the moment it is judged), and complete once the run ends (test_sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.results import ArchitectureEntry, Check, DeviceInfo, Report, ResultRecord, RunInfo, Status
from worker.orchestration import sweep
from worker.orchestration.sweep import _Collector


def test_the_report_is_rewritten_at_most_every_json_every_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(sweep.time, "monotonic", lambda: now[0])
    path = tmp_path / "r.json"
    col = _Collector(Report(run=RunInfo(device=DeviceInfo(name="cpu"))), None, None, path)

    def end(name: str, after_s: float) -> list[str]:
        """``name`` ends ``after_s`` after the previous one; the architectures the file on disk holds."""
        now[0] += after_s
        col.add(ResultRecord(architecture=name, rank=1, device="cpu", check=Check.LOAD, status=Status.PASS))
        col.arch_done(ArchitectureEntry(name=name, model_type="llama", rank=1), None)
        return [r["architecture"] for r in json.loads(path.read_text())["results"]] if path.exists() else []

    assert end("A", 0.5) == []  # too soon after the run began: not written yet
    assert end("B", sweep.JSON_EVERY_S) == ["A", "B"]  # written: everything so far
    assert end("C", sweep.JSON_EVERY_S / 2) == ["A", "B"]  # not again so soon
    assert end("D", sweep.JSON_EVERY_S / 2) == ["A", "B", "C", "D"]
