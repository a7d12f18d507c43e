"""`compat blockers` prints a sentence only for an op that alone takes an architecture off the CPU (issue 19: it
ended with a dozen "take 0 architecture(s) off the CPU" lines)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cli.app import app
from compat.results import DeviceInfo, Report, ResultRecord, RunInfo


def _rec(arch: str, check: str, fallback: list[str]) -> ResultRecord:
    return ResultRecord(architecture=arch, device="neuron", check=check, status="pass", fallback_ops=fallback)


def test_zero_count_fallback_lines_are_not_printed(tmp_path: Path) -> None:
    # A runs two ops on the CPU (neither alone takes it off); B runs only argmax there (argmax takes B off).
    recs = [_rec("A", "load", []), _rec("A", "forward", ["aten::isin (Long)", "aten::argmax (Float)"]),
            _rec("A", "generate", []), _rec("B", "load", []), _rec("B", "forward", []),
            _rec("B", "generate", ["aten::argmax (Float)"])]
    path = tmp_path / "r.json"
    path.write_text(Report(run=RunInfo(device=DeviceInfo(name="neuron")), results=recs).model_dump_json())
    out = " ".join(CliRunner().invoke(app, ["blockers", "--json", str(path)]).output.split())  # the console wraps
    assert "implement aten::argmax natively to take 1 architecture(s) off the CPU (falls back in 2)" in out
    assert "take 0 architecture(s)" not in out and "aten::isin" in out  # still in the table
