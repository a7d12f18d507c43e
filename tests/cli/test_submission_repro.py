"""The repro of a submitted result rebuilds the submitted config (issue 19): a submission run's records carry
``compat repro --submission N``, which shrinks the config kept on the submission's row (the upload, or the Hub config
read when the run started) exactly as the run did; the script it writes builds that model, not the registry's.

The first test runs a real submission through the sweep's process pool on the simulated neuron device in strict mode
(no CPU fallback: greedy generate's argmax fails, so a record carries a reproducer), then runs the generated script.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from submission_row import queued_submission
from typer.testing import CliRunner

from cli.app import app
from cli.serve import create_app
from compat.settings import get_settings
from service import db
from service.store import Store
from service.submissions import HUB_CONFIG_NOTE
from worker.build.tiny_config import shrink
from worker.orchestration import submissions
from worker.orchestration.submissions import run_submission, submission_entry

# Unlike the registry's tiny Llama (hidden 64, 4 heads, silu, vocab 1024): a narrower, GELU, 500-token Llama.
SUBMITTED = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 32,
             "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
             "vocab_size": 500, "hidden_act": "gelu", "rms_norm_eps": 1e-3, "max_position_embeddings": 256}
# Runs the script as `python repro.py` would, in a bare environment with no harness on the path, then says what it
# built (its globals: the reference model `ref`).
_RUN_SCRIPT = """
import json, runpy, sys
g = runpy.run_path(sys.argv[1], run_name="__main__")
cfg = g["ref"].config
print("BUILT " + json.dumps({"hidden_size": cfg.hidden_size, "hidden_act": cfg.hidden_act,
                              "vocab": g["ref"].get_input_embeddings().weight.shape[0],
                              "heads": cfg.num_attention_heads, "kv_heads": cfg.num_key_value_heads}))
"""
runner = CliRunner()


@pytest.fixture
def env(isolated_settings, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: ANN001
    monkeypatch.setenv("COMPAT_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    db.upgrade(sqlite_url)
    return sqlite_url




def _run_script(script: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _RUN_SCRIPT, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=script.parent, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})


def test_a_submitted_results_repro_rebuilds_the_submitted_config(env: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPAT_DEVICE", "neuron")
    monkeypatch.setenv("NEURON_STRICT", "1")  # read by the pool's spawned worker
    get_settings.cache_clear()
    sid = queued_submission(env, config=SUBMITTED)
    assert run_submission(sid, env) == "done"  # jobs=1: the sweep's pool, the real runner
    results = Store(env).run_results(Store(env).submission(sid)["run_id"])
    with_repro = [r for r in results if r.repro]
    assert with_repro, [(r.check, r.status) for r in results]
    for r in with_repro:  # was: compat repro LlamaForCausalLM ..., the registry's tiny Llama
        assert r.repro == f"compat repro --submission {sid} --device neuron --check {r.check}"

    script = tmp_path / "repro.py"
    res = runner.invoke(app, ["repro", "--submission", str(sid), "--device", "cpu", "--check", "forward,generate",
                              "--out", str(script)])
    assert res.exit_code == 0, res.output
    done = _run_script(script)
    assert done.returncode == 0, done.stderr[-3000:]
    built = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("BUILT "))[6:])
    assert built == {"hidden_size": 32, "hidden_act": "gelu", "vocab": 500, "heads": 2, "kv_heads": 1}
    assert "forward logits: max abs err 0," in done.stdout  # cpu vs cpu, same weights
    # The very config the run built: the submission's entry, shrunk by the sweep's shrink.
    tiny = shrink(submission_entry(Store(env).submission(sid))).to_dict()
    assert json.loads(json.dumps(tiny, default=str)) == json.loads(script.read_text().split('r"""')[1].split('"""')[0])




def test_a_hub_submissions_config_is_kept_so_its_repro_needs_no_hub(env: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPAT_RUN_HOOK", "passing_runner:passing")
    monkeypatch.setenv("COMPAT_DEVICE", "cpu")
    get_settings.cache_clear()
    monkeypatch.setattr(submissions, "hub_config", lambda model_id, revision: dict(SUBMITTED))
    sid = queued_submission(env, model_id="org/narrow-llama", revision="v2")
    assert run_submission(sid, env, jobs=0) == "done"
    sub = Store(env).submission(sid)
    assert sub["config"] == SUBMITTED and HUB_CONFIG_NOTE in sub["notes"]  # was: config None, Hub needed again

    def offline(model_id: str, revision: str | None) -> dict:
        raise AssertionError("the repro read the Hub")

    monkeypatch.setattr(submissions, "hub_config", offline)
    script = tmp_path / "repro.py"
    res = runner.invoke(app, ["repro", "--submission", str(sid), "--device", "cpu", "--out", str(script)])
    assert res.exit_code == 0, res.output
    assert '"hidden_act": "gelu"' in script.read_text() and '"hidden_size": 32' in script.read_text()
    # The submission page still says the config came from the Hub, not from an upload.
    with TestClient(create_app()) as c:
        page = c.get(f"/submissions/{sid}").text
        api = c.get(f"/api/v1/submissions/{sid}").json()
    assert "org/narrow-llama" in page and "uploaded config.json" not in page and api["uploaded"] is False


@pytest.mark.parametrize(("args", "expect"), [
    (["repro", "--submission", "999", "--device", "cpu"], "no submission 999 in the store"),
    (["repro", "LlamaForCausalLM", "--submission", "1", "--device", "cpu"], "give ARCH or --submission N, not both"),
    (["repro", "--device", "cpu"], "give ARCH (e.g. LlamaForCausalLM) or --submission N"),
])
def test_repro_submission_errors_are_one_line(env: str, args: list[str], expect: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and expect in res.output and "Traceback" not in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1


def test_a_hub_submission_that_never_ran_has_no_config_to_reproduce(env: str) -> None:
    sid = queued_submission(env, model_id="org/never-ran")
    res = runner.invoke(app, ["repro", "--submission", str(sid), "--device", "cpu"])
    assert res.exit_code == 1 and f"submission {sid} (org/never-ran) has no stored config" in res.output
