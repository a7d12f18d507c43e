"""The compat CLI: bad input is one line naming the valid choices with exit code 2; a tiny in-process sweep works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from cli.console import console
from compat.results import (
    ArchitectureEntry,
    Check,
    DeviceInfo,
    ErrorInfo,
    Report,
    ResultRecord,
    RunInfo,
    Status,
)

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["sweep", "--device", "foo"], "valid devices: neuron, cpu, cuda, mps, xpu"),
        (["sweep", "--device", "cpu", "--checks", "load,bogus"], "valid checks: load, forward, generate, train, compile"),
        (["sweep", "--device", "cpu", "--arch", "NopeForCausalLM", "--no-store"],
         "architectures known; list them with `compat catalog list`"),
        (["sweep", "--device", "cpu", "--source", "web"], "valid sources: auto, hub, snapshot, registry"),
        (["repro", "LlamaForCausalLn", "--device", "cpu"], "did you mean LlamaForCausalLM"),
        (["repro", "LlamaForCausalLM", "--device", "tpu"], "valid devices:"),
        (["show", "NopeForCausalLM", "--json", "/nonexistent.json"], "cannot read report"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], expect: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], res.output


def test_unavailable_real_device_is_bad_input() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res = runner.invoke(app, ["sweep", "--device", "cuda", "--no-store"])
    assert res.exit_code == 2 and "not available" in res.output


def test_sweep_show_blockers_from_json(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    res = runner.invoke(app, ["sweep", "--device", "cpu", "--arch", "GPT2LMHeadModel", "--checks", "load,forward",
                              "--jobs", "0", "--no-store", "--json", str(report)])
    assert res.exit_code == 0, res.output
    # Not a terminal: progress is plain lines, one per architecture with its verdict, elapsed time and eta.
    lines = res.output.splitlines()
    assert lines[0] == "[0/1] sweep cpu: 1 to do"
    assert any(ln.startswith("[1/1] sweep cpu GPT2LMHeadModel: not_judged | ") and ln.endswith("elapsed, eta 0s")
               for ln in lines), res.output
    caption = " ".join(res.output.split())  # rich wraps the caption
    # generate was not run, so no support verdict, but every check that ran passed.
    assert "1 not judged" in caption and "1 pass every check" in caption
    data = json.loads(report.read_text())
    assert [(r["check"], r["status"]) for r in data["results"]] == [("load", "pass"), ("forward", "pass")]
    shown = runner.invoke(app, ["show", "GPT2LMHeadModel", "--json", str(report)])
    assert shown.exit_code == 0 and "forward" in shown.output and "cosine" in shown.output
    blocked = runner.invoke(app, ["blockers", "--json", str(report)])
    assert blocked.exit_code == 0 and "no blocking ops" in blocked.output


# The generated scripts of the repro tests, each with its `compat repro` arguments beyond the architecture.
REPRO = {"LlamaForCausalLM": ["--check", "forward,generate"],
         # Architectures with an entry in worker/run/reference/inputs.py (codebook rows and labels, images for the loss, train
         # mode): a script with plain text inputs crashes on them instead of reproducing the sweep's run.
         "MusicgenForCausalLM": [], "GitForCausalLM": [], "ReformerModelWithLMHead": []}
# Runs each script as `python script.py` would (__main__, its own globals), in one fresh interpreter with a bare
# environment and no harness on the path; an exception (or a non-zero exit) is that script's failure. The one
# interpreter pays the torch/transformers import (~15 s on a loaded 2-core box) once instead of once per script.
_RUN_SCRIPTS = """
import contextlib, io, json, runpy, sys, traceback
out = {}
for path in sys.argv[1:]:
    buf, code = io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        code, _ = 1, buf.write(traceback.format_exc())
    out[path] = {"returncode": code, "stdout": buf.getvalue()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def repro_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[object, str, dict]]:
    """(the `compat repro` result, the script's text, its run: returncode and stdout) per architecture."""
    tmp = tmp_path_factory.mktemp("repro")
    made = {}
    for arch, extra in REPRO.items():
        script = tmp / f"{arch}.py"
        made[arch] = (runner.invoke(app, ["repro", arch, "--device", "cpu", *extra, "--out", str(script)]), script)
    scripts = [str(script) for res, script in made.values() if res.exit_code == 0]
    done = subprocess.run([sys.executable, "-c", _RUN_SCRIPTS, *scripts], capture_output=True, text=True,
                          timeout=540, cwd=tmp, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    runs = json.loads(done.stdout.splitlines()[-1])
    return {arch: (res, script.read_text() if script.exists() else "", runs.get(str(script), {}))
            for arch, (res, script) in made.items()}


def _tokens(stdout: str) -> dict[str, str]:
    return {ln.split(":")[0]: ln.split(":", 1)[1].strip() for ln in stdout.splitlines() if "tokens:" in ln}


def test_repro_script_runs_standalone(repro_runs) -> None:  # noqa: ANN001
    res, text, done = repro_runs["LlamaForCausalLM"]
    assert res.exit_code == 0, res.output
    assert "import worker" not in text and "from worker" not in text  # standalone: no harness import
    assert done["returncode"] == 0, done["stdout"][-2000:]
    # cpu vs cpu with the same weights: forward is bit-identical and generation agrees token for token.
    assert "forward logits: max abs err 0," in done["stdout"]
    lines = _tokens(done["stdout"])
    assert lines["reference tokens"] == lines["device tokens"]


@pytest.mark.parametrize("arch", ["MusicgenForCausalLM", "GitForCausalLM", "ReformerModelWithLMHead"])
def test_repro_script_builds_inputs_like_the_sweep(repro_runs, arch: str) -> None:  # noqa: ANN001
    res, _, done = repro_runs[arch]
    assert res.exit_code == 0, res.output
    assert done["returncode"] == 0, done["stdout"][-2000:]
    assert "forward logits: max abs err 0," in done["stdout"]
    lines = _tokens(done["stdout"])
    assert lines["reference tokens"] == lines["device tokens"] and len(json.loads(lines["device tokens"])) == 32
    losses = [ln for ln in done["stdout"].splitlines() if ln.startswith("cpu loss")]
    assert len(losses) == 2 and losses[0] == losses[1]  # cpu twice from the same weights: the same loss


def _failing_report(path: Path) -> None:
    op = "aten::_scaled_dot_product_efficient_attention (BFloat16, BFloat16, BFloat16, Float)"
    recs = [ResultRecord(architecture="MixtralForCausalLM", device="neuron", check=Check.LOAD, status=Status.PASS),
            ResultRecord(architecture="MixtralForCausalLM", device="neuron", check=Check.FORWARD,
                         status=Status.UNSUPPORTED_DTYPE, blocking_op=op,
                         error=ErrorInfo(type="NeuronUnsupportedDtypeError",
                                         message=f"{op} is not supported on neuron for these dtypes"))]
    report = Report(run=RunInfo(device=DeviceInfo(name="neuron")),
                    architectures=[ArchitectureEntry(name="MixtralForCausalLM", model_type="mixtral", rank=1)],
                    results=recs)
    path.write_text(report.model_dump_json())


def test_show_at_80_columns_keeps_status_and_op_whole(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    _failing_report(report)
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "HF_HUB_OFFLINE": "1", "COMPAT_VAR_DIR": str(tmp_path / "var")}
    done = subprocess.run([sys.executable, "-m", "cli.app", "show", "MixtralForCausalLM", "--json",
                           str(report)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80, done.stdout
    assert any("unsupported_dtype" in ln for ln in lines) and any(
        "aten::_scaled_dot_product_efficient_attention" in ln for ln in lines), done.stdout


def test_blockers_at_80_columns_keeps_the_op_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "r.json"
    _failing_report(report)
    monkeypatch.setattr(console, "width", 80)
    res = runner.invoke(app, ["blockers", "--json", str(report)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(ln) for ln in lines) <= 80, res.output
    assert any("aten::_scaled_dot_product_efficient_attention" in ln for ln in lines), res.output
