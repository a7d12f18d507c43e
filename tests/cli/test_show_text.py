"""`compat show` prints each known-issue text once and never cuts an error mid-sentence (issue 19: a 13-line
known-issue text repeated for each check that carried it, errors cut at 120 characters), and reads without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from cli.console import console
from compat.results import DeviceInfo, ErrorInfo, Report, ResultRecord, RunInfo
from compat.text_cut import DETAIL_CHARS, shorten

ROOT = Path(__file__).resolve().parents[2]
ARCH = "MixtralForCausalLM"
KNOWN = ("Transformers' grouped-mm MoE routing sorts integer expert ids (torch.sort(expert_ids)); real Trn2 lowers "
         "sort to the AwsNeuronTopK custom op, which rejects 32/64-bit integers (NCC_EVRF013; the MoE models failed "
         "there). trn2/trn3 known issue; switch integer_sort_topk (transformers/integrations/moe.py)")
# As the simulated device words it: one long first sentence (a period inside a file name and a parenthesis), then
# the dtypes and shapes, which differ per check.
FIRST = ("The neuron kernel of 'aten::sort' failed for these inputs ([NCC_EVRF013] TopK custom operation does not "
         "support 32-bit and 64-bit integer types: torch-neuronx lowers sort/topk/argsort to the AwsNeuronTopK "
         "custom op, which rejects integer inputs (seen on real Trn2 from torch.sort(expert_ids) in "
         "transformers/integrations/moe.py; the model failed, no CPU retry) (HISTORY.tsv)).")


def _error(shape: int) -> ErrorInfo:
    return ErrorInfo(type="NeuronUnsupportedOpError", message=f"{FIRST} Input dtypes: (Int); input shapes: ([{shape}]).")


@pytest.fixture
def report(tmp_path: Path) -> Path:
    recs = [ResultRecord(architecture=ARCH, device="neuron", check="load", status="pass")]
    recs += [ResultRecord(architecture=ARCH, device="neuron", check=c, status="unsupported_op",
                          blocking_op="aten::sort (Int)", error=_error(n), known_issue=KNOWN)
             for c, n in (("forward", 64), ("generate", 16), ("train", 64))]
    recs.append(ResultRecord(architecture=ARCH, device="cpu", check="forward", status="error",
                             error=ErrorInfo(type="RuntimeError", message="a short error. Shown whole.")))
    path = tmp_path / "r.json"
    path.write_text(Report(run=RunInfo(device=DeviceInfo(name="neuron")), results=recs).model_dump_json())
    return path


def _show(report: Path, *args: str) -> str:
    res = CliRunner().invoke(app, ["show", ARCH, "--json", str(report), *args])
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("width", [80, 160])
def test_each_known_issue_text_is_printed_once(report: Path, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", width)
    out = _show(report)
    words = " ".join(out.split())
    assert words.count("AwsNeuronTopK custom op, which rejects 32/64-bit integers") == 1, out
    assert words.count("[known issue 1]") == 3, out  # each check's row refers to it
    assert f"known issue 1: {' '.join(KNOWN.split())}" in words, out


@pytest.mark.parametrize("width", [80, 160])
def test_an_error_is_cut_at_a_sentence_end_and_says_how_to_see_it(report: Path, width: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", width)
    tokens = _show(report).split()
    assert "(HISTORY.tsv))." in tokens and "([64])." not in tokens  # the first sentence whole, the rest left out
    assert "[…]" in tokens and f"show {ARCH} --full" in " ".join(tokens)
    assert "Shown whole." in " ".join(tokens)  # a short error is never marked
    full = _show(report, "--full").split()
    assert "([64])." in full and "([16])." in full and "[…]" not in full


def test_shorten_never_cuts_a_sentence() -> None:
    short = "One sentence. Another."
    assert shorten(short) == (short, False)
    text = ("A" * 150 + ". " + "b" * 150 + " (see x.py). " + "c" * 200 + ".")
    cut, was = shorten(text)
    assert was and cut == text[:text.index("). ") + 2] and len(cut) <= DETAIL_CHARS
    first = "d" * 500 + " e. f."  # no sentence end within the bound: the first sentence whole
    assert shorten(first) == ("d" * 500 + " e.", True)
    lines = "line one\n" + "x" * 450
    assert shorten(lines) == ("line one", True)


def test_show_reads_without_torch(report: Path, tmp_path: Path) -> None:
    # ~7 s before: the read imported the sweep machinery (torch, transformers, peft, trl) to print stored rows.
    code = (f"import sys\nfrom cli.app import main\nsys.argv = ['compat', 'show', {ARCH!r}, '--json', {str(report)!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "COMPAT_VAR_DIR": str(tmp_path / "var")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "False False", done.stdout[-2000:]
