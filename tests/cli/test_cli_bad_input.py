"""Bad input to every command: exit code 2, one line with "did you mean" suggestions, and torch never imported (a
typo answers before the harness loads). Valid names with nothing stored behind them answer with exit 1, never an
empty table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from compat.results import ArchitectureEntry, Check, DeviceInfo, ResultRecord, RunInfo, Status
from compat.settings import get_settings
from service.store import Store
from worker.catalog.catalog import registry_entries

REPO = Path(__file__).resolve().parents[2]

# (args, extra environment, what the one line must say)
BAD_INPUT: list[tuple[list[str], dict[str, str], str]] = [
    (["sweep", "--device", "tpu"], {}, "unknown device 'tpu'; did you mean xpu or cpu? valid devices: neuron, cpu"),
    (["sweep"], {"COMPAT_DEVICE": "cdua"}, "unknown device 'cdua'; did you mean cuda?"),
    (["sweep", "--device", "cpu", "--checks", "load,frward"], {}, "unknown check 'frward'; did you mean forward?"),
    (["sweep", "--device", "cpu", "--source", "hbu"], {}, "unknown source 'hbu'; did you mean hub?"),
    (["sweep", "--device", "cpu", "--arch", "LlamaForCausalLm"], {},
     "did you mean LlamaForCausalLM, MllamaForCausalLM or Llama4ForCausalLM? 181 architectures known; list them "
     "with `compat catalog list`"),
    (["sweep", "--device", "cpu", "--baseline", "0123abcd"], {}, "unknown run id '0123abcd'; no runs known"),
    (["sweep", "--device", "neuron"], {"NEURON_PROFILE": "legacy_xla"},
     "unknown NEURON_PROFILE 'legacy_xla'; did you mean legacy-xla? valid profiles: legacy-xla, trn2, trn3"),
    (["show", "mixtral"], {}, "unknown architecture 'mixtral'; did you mean MixtralForCausalLM"),
    (["show", "LlamaForCausalLM", "--device", "tpu"], {}, "unknown device 'tpu'"),
    (["blockers", "--device", "tpu"], {}, "unknown device 'tpu'"),
    (["blockers", "--device", "neuron:x"], {}, "unknown device 'neuron:x'; did you mean neuron?"),
    (["repro", "Qwen2ForCausalLm", "--device", "cpu"], {}, "did you mean Qwen2ForCausalLM"),
    (["repro", "LlamaForCausalLM", "--device", "tpu"], {}, "unknown device 'tpu'"),
    (["repro", "LlamaForCausalLM", "--device", "cpu", "--check", "trian"], {}, "did you mean train?"),
    (["catalog", "list", "--source", "registy"], {}, "unknown source 'registy'; did you mean registry?"),
]

_SCRIPT = """
import json, os, sys
from typer.testing import CliRunner
from compat.settings import get_settings
from cli.app import app
out = []
for args, env in json.loads(sys.argv[1]):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    get_settings.cache_clear()
    res = CliRunner().invoke(app, args)
    for k, v in saved.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    out.append([res.exit_code, res.output, [m for m in ("torch", "transformers") if m in sys.modules]])
print(json.dumps(out))
"""


@pytest.fixture
def fresh_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty store and var dir of this test's own, in this process's settings and for a child process."""
    env = {"COMPAT_VAR_DIR": str(tmp_path / "var"), "COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}",
           "COMPAT_CATALOG_SOURCE": "registry"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("COMPAT_CATALOG_SNAPSHOT", raising=False)
    get_settings.cache_clear()
    yield env
    get_settings.cache_clear()


def test_bad_input_answers_one_line_exit_2_without_importing_torch(fresh_store: dict[str, str]) -> None:
    # A fresh interpreter: in this one torch is already imported by other tests.
    env = {**os.environ, **fresh_store, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    env.pop("NEURON_PROFILE", None)
    cases = [[args, extra] for args, extra, _ in BAD_INPUT]
    done = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(cases)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    for (args, _, expect), (code, output, heavy) in zip(BAD_INPUT, results, strict=True):
        lines = [ln for ln in output.splitlines() if ln.strip()]
        assert code == 2, (args, output)
        assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], (args, output)
        assert heavy == [], (args, heavy)


runner = CliRunner()


def test_show_accepts_an_architecture_only_the_store_knows(fresh_store: dict[str, str]) -> None:
    # An architecture from a Hub listing (remote code, say) is in no offline catalog but has stored results.
    store = Store()
    entry = ArchitectureEntry(name="OddRemoteForCausalLM", model_type="odd", rank=1)
    run_id = store.start_run(RunInfo(device=DeviceInfo(name="neuron")), [entry],
                             [("OddRemoteForCausalLM", "neuron", "load")])
    store.add_results(run_id, [ResultRecord(architecture="OddRemoteForCausalLM", device="neuron", check=Check.LOAD,
                                            status=Status.SKIPPED, reason="remote code")])
    store.finish_run(run_id)  # `show` reads finished runs only
    shown = runner.invoke(app, ["show", "OddRemoteForCausalLM"])
    assert shown.exit_code == 0, shown.output
    assert "skipped" in shown.output and "remote code" in shown.output
    # A close misspelling of it is suggested from the store's names too.
    typo = runner.invoke(app, ["show", "OddRemoteForCausalLn"])
    assert typo.exit_code == 2 and "did you mean OddRemoteForCausalLM" in typo.output, typo.output
    # A misspelt run id is answered with the stored one it resembles.
    bad = runner.invoke(app, ["sweep", "--device", "cpu", "--baseline", run_id[:-1] + "x"])
    assert bad.exit_code == 2 and f"did you mean {run_id}?" in bad.output, bad.output


def test_blockers_with_nothing_stored_says_so_instead_of_an_empty_answer(fresh_store: dict[str, str]) -> None:
    res = runner.invoke(app, ["blockers", "--device", "CUDA:1"])
    assert res.exit_code == 1, res.output
    # It names the store it read, and leaves none behind (issue 19).
    url = fresh_store["COMPAT_DATABASE_URL"]
    assert res.output.strip() == f"error: no results on cuda:1 in {url} (no store there yet); run `compat sweep` first"
    assert not Path(url.removeprefix("sqlite:///")).exists()


def test_catalog_list_prints_every_name_one_a_line(fresh_store: dict[str, str]) -> None:
    res = runner.invoke(app, ["catalog", "list", "--source", "registry"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [e.name for e in registry_entries()]
    missing = runner.invoke(app, ["catalog", "list", "--source", "snapshot"])
    assert missing.exit_code == 1 and "compat catalog refresh" in missing.output
