"""``compat sweep --models`` and the per-model reads: each corpus model judged with its own config, models whose
tiny configs are identical sharing one run, refusals as rows, and the same answer from ``compat lookup``, the API
and the per-model headline. The runner is the passing stand-in (no torch run): these tests are about what happens
around the runs (grouping, keys, reads), not about verdicts.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli import entry
from cli.app import app
from compat.settings import Settings, get_settings
from dashboards.views import mount_pages
from service import model_queries
from service.app import create_app
from service.store import Store
from worker.catalog.corpus_models import corpus_rows
from worker.orchestration.model_sweep import prepare_models, rounds, run_models
from worker.run.process.devices import resolve_device

MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "gpt2", "microsoft/phi-1_5",
          "Qwen/Qwen3.5-9B"]


@pytest.fixture
def swept(isolated_settings, sqlite_url: str, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("COMPAT_RUN_HOOK", "passing_runner:passing")
    monkeypatch.setenv("COMPAT_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    rows = [r for r in corpus_rows() if r.model_id in MODELS]
    prepared = prepare_models(rows)
    store = Store(sqlite_url)
    result = run_models(prepared, resolve_device("cpu"), ["load", "forward", "generate"], jobs=0, store=store)
    return result, store, sqlite_url


def test_identical_tiny_configs_share_one_run_and_refusals_are_rows(swept) -> None:  # noqa: ANN001
    result, _, _ = swept
    by_id = {r.model_id: r for r in result.rows}
    assert len(result.rows) == 5
    # Llama-3.1-8B and Llama-3.3-70B shrink to the same tiny config: one run for both.
    assert by_id["meta-llama/Llama-3.1-8B-Instruct"].tiny_digest == by_id["meta-llama/Llama-3.3-70B-Instruct"].tiny_digest
    assert by_id["meta-llama/Llama-3.1-8B-Instruct"].run_id == by_id["meta-llama/Llama-3.3-70B-Instruct"].run_id
    assert result.distinct == 3 and result.model_runs == 3  # 4 buildable models, 3 distinct tiny configs
    refused = by_id["microsoft/phi-1_5"]
    assert refused.refusal.startswith("remote code") and refused.run_id is None and refused.tiny_digest is None
    # A native wrapper is judged as its text causal LM (as AutoModelForCausalLM loads it), listed under its class.
    qwen = by_id["Qwen/Qwen3.5-9B"]
    assert (qwen.architecture, qwen.judged_as) == ("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM")


def test_rounds_put_one_config_per_class_in_a_run() -> None:
    rows = [r for r in corpus_rows() if r.model_id in MODELS and r.refusal is None]
    for i, r in enumerate(rows):
        r.tiny_digest = f"d{i}"  # every model its own config: the two Llamas must then go to different runs
    out = rounds({r.tiny_digest: [r] for r in rows})
    assert sorted(len(b) for b in out) == [1, 3]
    assert all(len({m.judged_as for _, m in b}) == len(b) for b in out)


def test_lookup_reads_verdict_checks_and_plan_from_the_store(swept) -> None:  # noqa: ANN001
    _, store, _ = swept
    with store.session() as s:
        a = model_queries.lookup(s, "meta-llama/llama-3.1-8b-instruct")  # the Hub's ids are case-insensitive
        head = model_queries.headline(s)
        unknown = model_queries.lookup(s, "nobody/nothing")
        cousin = model_queries.lookup(s, "someone/llama-variant", config={
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048})
    assert a.verdict == "supported" and a.basis == model_queries.JUDGED
    assert set(a.checks) == {"load", "forward", "generate"} and all(c.status == "pass" for c in a.checks.values())
    assert abs(a.plan["parameters"] - 8.03e9) / 8.03e9 <= 0.02  # the published count (issue 33), 2%
    assert a.plan["basis"] == "planned from config.json, not run" and a.plan["tensor_parallel"] == 1
    assert unknown is None
    assert cousin.verdict == "supported" and cousin.basis == model_queries.NOT_RUN
    assert any(d.startswith("hidden_size: 4096 -> 2048") or d.startswith("hidden_size: 8192 -> 2048")
               for d in cousin.differs_in)
    # 4 judged models pass; Llama-3.3-70B (141 GB in bf16) needs 8 NeuronCores; phi-1_5 is refused.
    assert head.text().startswith("of 5 models: 4 run out of the box; 1 need more than one NeuronCore; 1 refused")


def test_cli_and_api_give_the_same_answer(swept) -> None:  # noqa: ANN001
    _, _, url = swept
    res = CliRunner().invoke(app, ["lookup", "meta-llama/Llama-3.1-8B-Instruct", "--json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.output)
    client = TestClient(create_app(Settings(database_url=url), migrate=False))
    api = client.get("/api/v1/models/meta-llama/Llama-3.1-8B-Instruct")
    assert api.status_code == 200 and api.json() == cli
    assert set(cli) >= {"model_id", "architecture", "verdict", "checks", "plan"}
    assert set(cli["plan"]) >= {"parameters", "dtype", "weight_bytes", "kv_cache_bytes", "tensor_parallel",
                                "neuron_cores", "instance", "basis"}
    listing = client.get("/api/v1/models").json()
    with Store(url).session() as s:
        assert listing["headline"] == model_queries.headline(s).text()
    missing = client.get("/api/v1/models/nobody/nothing")
    assert missing.status_code == 404 and "submit it" in missing.json()["error"]
    badge = client.get("/api/v1/models/meta-llama/Llama-3.1-8B-Instruct/badge.svg")
    assert badge.status_code == 200 and "cpu: supported" in badge.text
    assert "unsupported" in client.get("/api/v1/models/microsoft/phi-1_5/badge.svg").text  # refused: remote code
    assert client.get("/api/v1/models/nobody/nothing/badge.svg").status_code == 404
    for bad in ("/api/v1/models/bad%20org/x", "/api/v1/models/a..b/x", "/api/v1/models/org/" + "n" * 97):
        r = client.get(bad)
        assert r.status_code == 422 and "\n" not in r.json()["error"], (bad, r.text)
    res = CliRunner().invoke(app, ["lookup", "nobody/nothing"])
    assert res.exit_code == 1 and "submit it" in res.output
    res = CliRunner().invoke(app, ["lookup", "bad id!"])
    assert res.exit_code == 2 and "invalid model id" in res.output


def test_the_compat_program_answers_a_lookup_as_the_api_does(swept, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                                              capsys: pytest.CaptureFixture) -> None:
    """``compat lookup`` as installed (pyproject's entry point ``cli.entry:main``, the lookup's own small command
    line): the same JSON as the API, and the same one-line 404 hint and exit codes."""
    _, _, url = swept
    monkeypatch.setattr(entry, "_exit_now", sys.exit)  # in this process: raise SystemExit, not os._exit
    monkeypatch.setattr(sys, "argv", ["compat", "lookup", "meta-llama/Llama-3.1-8B-Instruct", "--json"])
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code in (0, None)
    client = TestClient(create_app(Settings(database_url=url), migrate=False))
    assert json.loads(capsys.readouterr().out) == client.get("/api/v1/models/meta-llama/Llama-3.1-8B-Instruct").json()
    for argv, code, text in ((["nobody/nothing"], 1, "submit it"), (["bad id!"], 2, "invalid model id")):
        monkeypatch.setattr(sys, "argv", ["compat", "lookup", *argv])
        with pytest.raises(SystemExit) as done:
            entry.main()
        err = capsys.readouterr().err
        assert done.value.code == code and err.startswith("error: ") and text in err and len(err.splitlines()) == 1


def test_a_lookup_imports_only_the_store_read(swept) -> None:  # noqa: ANN001
    """What keeps ``compat lookup`` under a second (bench/README.md has the times; no test times it): the program
    answers without torch, Transformers, Alembic, rich or the other commands' Typer tree (``cli.app``)."""
    _, _, url = swept
    code = ("import sys; sys.argv = ['compat', 'lookup', 'gpt2', '--json']\n"
            "from cli import entry\n"
            "entry._exit_now = sys.exit\n"
            "try:\n    entry.main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "heavy = ('torch', 'transformers', 'alembic', 'rich', 'cli.app', 'cli.commands', 'fastapi')\n"
            "print('LOADED', [m for m in heavy if m in sys.modules])\n")
    env = {**os.environ, "COMPAT_DATABASE_URL": url}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"model_id": "gpt2"' in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "LOADED []"


def test_the_installed_program_ends_at_once_with_its_output_and_code(swept) -> None:  # noqa: ANN001
    """The program as run (``python -m cli.entry``, what the console script calls): it ends by ``os._exit`` after
    flushing (no interpreter teardown, bench/README.md has the time), so its whole output must reach a pipe and its
    exit code must be the lookup's own: 0 for an answer, 1 for an unknown model, 2 for a malformed id."""
    _, _, url = swept
    env = {**os.environ, "COMPAT_DATABASE_URL": url}
    for argv, code in ((["meta-llama/Llama-3.1-8B-Instruct", "--json"], 0), (["nobody/nothing"], 1), (["bad id!"], 2)):
        out = subprocess.run([sys.executable, "-m", "cli.entry", "lookup", *argv], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == code, (argv, out.stderr)
        if code == 0:
            assert json.loads(out.stdout)["plan"]["parameters"] == 8_030_261_248  # the whole JSON, parsed
        else:
            assert out.stderr.startswith("error: ") and len(out.stderr.splitlines()) == 1


def test_pages_show_the_same_answer_and_headline(swept) -> None:  # noqa: ANN001
    _, store, url = swept
    client = TestClient(create_app(Settings(database_url=url), migrate=False, pages=mount_pages))
    api = client.get("/api/v1/models/meta-llama/Llama-3.1-8B-Instruct").json()
    with store.session() as s:
        headline = model_queries.headline(s).text()
    overview = client.get("/")
    assert overview.status_code == 200 and 'action="/models"' in overview.text and headline in overview.text
    page = client.get("/models/meta-llama/Llama-3.1-8B-Instruct")
    assert page.status_code == 200
    assert f"{api['plan']['parameters']:,}" in page.text and api["plan"]["basis"] in page.text
    assert api["verdict"] in page.text
    listing = client.get("/models")
    assert headline in listing.text and "/models/gpt2" in listing.text
    jump = client.get("/models", params={"q": "meta-llama/Llama-3.1-8B-Instruct"}, follow_redirects=False)
    assert jump.status_code == 303 and jump.headers["location"] == "/models/meta-llama/Llama-3.1-8B-Instruct"
    assert client.get("/models", params={"q": "no such id!"}).status_code == 422
    missing = client.get("/models/nobody/nothing")
    assert missing.status_code == 404 and "Submit" in missing.text


class _FakeDatasetHub(BaseHTTPRequestHandler):
    """The Hub subset huggingface_hub 2.4 uses to create a dataset repo and commit small files (regular uploads,
    inline in the commit): repos/create, validate-yaml, preupload, commit. 127.0.0.1 only."""

    files: dict[str, bytes] = {}
    auth: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.auth.append(self.headers.get("Authorization", ""))
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.path == "/api/repos/create":
            return self._send(200, {"url": f"{base}/datasets/org/compat-table", "name": "org/compat-table"})
        if self.path == "/api/validate-yaml":
            return self._send(200, {"errors": [], "warnings": []})
        if "/preupload/" in self.path:
            return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                              for f in json.loads(body)["files"]]})
        if "/commit/" in self.path:
            for line in body.decode().splitlines():
                item = json.loads(line)
                if item.get("key") == "file":
                    self.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
            return self._send(200, {"commitUrl": f"{base}/datasets/org/compat-table/commit/{'a' * 40}",
                                    "commitOid": "a" * 40, "success": True})
        return self._send(404, {"error": "not found"})


def test_publish_writes_parquet_tables_and_a_card_through_huggingface_hub(swept) -> None:  # noqa: ANN001
    _, store, _ = swept
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeDatasetHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        res = CliRunner().invoke(app, ["publish", "--repo", "org/compat-table", "--endpoint",
                                       f"http://127.0.0.1:{server.server_address[1]}", "--token", "hf_test"])
    finally:
        server.shutdown()
        server.server_close()
    assert res.exit_code == 0, res.output
    files = _FakeDatasetHub.files
    assert set(files) == {"models.parquet", "architectures.parquet", "README.md"}
    models = pq.read_table(io.BytesIO(files["models.parquet"])).to_pylist()
    assert {m["model_id"] for m in models} == set(MODELS)
    llama = next(m for m in models if m["model_id"] == "meta-llama/Llama-3.1-8B-Instruct")
    assert llama["verdict"] == "supported" and abs(llama["parameters"] - 8.03e9) / 8.03e9 <= 0.02
    card = files["README.md"].decode()
    with store.session() as s:
        assert model_queries.headline(s).text() in card
    assert "simulation" in card and "planned from config.json, not run" in card and "transformers" in card
    assert all(a == "Bearer hf_test" for a in _FakeDatasetHub.auth)
