"""Summaries fill the terminal, at least 80 columns when not a terminal (issue 19: the summary under the sweep table
wrapped at the table's 54 columns, and a log or a pipe took whatever narrow width rich measured)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from compat.results import ArchitectureEntry, DeviceInfo, Report, ResultRecord, RunInfo
from worker.catalog.catalog import Catalog, write_snapshot

ROOT = Path(__file__).resolve().parents[2]
ARCHS = ("LlamaForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel")


def _compat(tmp: Path, *args: str, **env: str) -> list[str]:
    """``compat ARGS`` piped (not a terminal) with COLUMNS=40: narrower than the floor."""
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'helpers'}",
            "HF_HUB_OFFLINE": "1", "HOME": str(tmp), "COLUMNS": "40", "COMPAT_VAR_DIR": str(tmp / "var"),
            "COMPAT_REFERENCE_CACHE": "0"}
    done = subprocess.run([sys.executable, "-m", "cli.app", *args], capture_output=True, text=True, cwd=tmp,
                          env={**base, **env}, stdin=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout.splitlines()


def test_the_sweep_summary_fills_80_columns(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot.json"
    write_snapshot(Catalog(source="hub", snapshot_id=None, entries=[
        ArchitectureEntry(name=n, model_type=n.lower(), rank=i) for i, n in enumerate(ARCHS, 1)]),
        snapshot, endpoint="test", limit=3)
    plan = tmp_path / "plan.json"
    plan.write_text('{"marker_dir": "%s", "archs": {"GPT2LMHeadModel": {"forward": ["unsupported_op", '
                    '"aten::histc (Long)"]}}}' % (tmp_path / "markers"))
    lines = _compat(tmp_path, "sweep", "--device", "cpu", "--jobs", "0", "--no-store", "--no-decisions",
                    COMPAT_CATALOG_SOURCE="snapshot", COMPAT_CATALOG_SNAPSHOT=str(snapshot),
                    COMPAT_RUN_HOOK="fake_runner:run", FAKE_RUNNER_PLAN=str(plan))
    start = next(i for i, ln in enumerate(lines) if "3 architectures:" in ln)
    summary = lines[start:start + 3]
    # Left-aligned at the console's width (80), not centred in the table's: the first line is filled to the end.
    assert summary[0].startswith("3 architectures: 2 supported natively, 0 with CPU fallback, 1 failing"), lines
    assert 70 < len(summary[0]) <= 80 and all(len(ln) <= 80 for ln in summary), "\n".join(summary)
    assert any(ln.startswith("scope: ") for ln in lines[start:]), lines
    assert any(ln.startswith("run ") and " on cpu: 2 / 3 supported" in ln for ln in lines), lines


def test_blockers_messages_fill_80_columns(tmp_path: Path) -> None:
    recs = [ResultRecord(architecture=a, device="neuron", check=c, status="pass",
                         fallback_ops=["aten::argmax (Float)"] if c == "generate" else [])
            for a in ARCHS for c in ("load", "forward", "generate")]
    report = tmp_path / "r.json"
    report.write_text(Report(run=RunInfo(device=DeviceInfo(name="neuron")), results=recs).model_dump_json())
    lines = _compat(tmp_path, "blockers", "--json", str(report))
    message = "implement aten::argmax natively to take 3 architecture(s) off the CPU (falls back in 3)"
    assert message[:60] in next(ln for ln in lines if ln.startswith("implement ")), lines
    assert all(len(ln) <= 80 for ln in lines), "\n".join(lines)
