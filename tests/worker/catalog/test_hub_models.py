"""``compat catalog refresh --models`` against the local fake of the Hub API (127.0.0.1, fixture configs): both
sorts stored with shas and a date, configs read at the listed sha, the architecture ranking = summed downloads,
remote code and bad configs refused with their reason."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from huggingface_hub import constants
from typer.testing import CliRunner

from cli.app import app
from compat.settings import get_settings
from service.store import Store
from worker.catalog.catalog import read_snapshot
from worker.catalog.corpus_models import corpus_rows
from worker.catalog.hub_models import refresh_models
from worker.orchestration.model_sweep import prepare_models, run_models
from worker.run.process.devices import resolve_device


def fixture_sha(model_id: str) -> str:
    return hashlib.sha1(model_id.encode()).hexdigest()  # what the fake lists (tests/worker/catalog/conftest.py)


def test_refresh_stores_both_sorts_with_shas_and_a_date(fake_hub, tmp_path) -> None:  # noqa: ANN001
    models_path, snap_path = tmp_path / "models.json", tmp_path / "catalog.json"
    snap, catalog = refresh_models(100, models_path, snap_path, endpoint=fake_hub.endpoint)
    payload = json.loads(models_path.read_text())
    assert set(payload["sorts"]) == {"downloads", "trending"}
    assert payload["created"][:10] == datetime.now(UTC).date().isoformat()
    downloads = payload["sorts"]["downloads"]
    assert [r["model_id"] for r in downloads] == [m for m, _, _ in sorted(fake_hub.models, key=lambda m: -m[1])]
    assert [r["model_id"] for r in payload["sorts"]["trending"]] == [r["model_id"] for r in downloads][::-1]
    assert all(r["sha"] == fixture_sha(r["model_id"]) for r in downloads)
    assert all({"model_id", "sha", "score", "architecture", "config_digest", "refusal"} <= set(r) for r in downloads)
    # Every config was read at its pinned sha, never at "main".
    files = [path for _, path, _ in fake_hub.requests if "/resolve/" in path]
    assert files and all("/resolve/main/" not in f for f in files)
    rows = {r.model_id: r for r in snap.by_sort["downloads"]}
    assert rows["remote/fancy-model"].refusal.startswith("remote code: model_type 'fancy'")
    assert "not JSON" in rows["broken/malformed"].refusal
    assert rows["meta-llama/Llama-3.1-8B-Instruct"].refusal is None
    assert rows["meta-llama/Llama-3.1-8B-Instruct"].catalog.startswith("Hub text-generation (transformers) by downloads")


def test_architecture_ranking_is_the_summed_downloads(fake_hub, tmp_path) -> None:  # noqa: ANN001
    snap, _ = refresh_models(100, tmp_path / "models.json", tmp_path / "catalog.json", endpoint=fake_hub.endpoint)
    stored = read_snapshot(tmp_path / "catalog.json")
    summed: dict[str, int] = {}
    for r in snap.by_sort["downloads"]:
        if r.config is not None:
            summed[r.architecture] = summed.get(r.architecture, 0) + (r.downloads or 0)
    assert {e.name: e.downloads for e in stored.entries} == summed
    assert [e.name for e in stored.entries] == sorted(summed, key=lambda a: (-summed[a], a))
    assert stored.get("LlamaForCausalLM").downloads == 900 + 700


def test_the_cli_refreshes_models(fake_hub, isolated_settings, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "models.json"
    res = CliRunner().invoke(app, ["catalog", "refresh", "--models", "--endpoint", fake_hub.endpoint,
                                   "--models-out", str(out)])
    assert res.exit_code == 0, res.output
    assert "downloads" in res.output and "trending" in res.output
    assert json.loads(out.read_text())["sorts"]["downloads"]
    assert isolated_settings.snapshot_path.exists()


def test_lookup_hub_answers_an_unknown_model_of_a_swept_architecture(fake_hub, isolated_settings, tmp_path,
                                                                      monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(constants, "ENDPOINT", fake_hub.endpoint)
    monkeypatch.setenv("COMPAT_RUN_HOOK", "passing_runner:passing")
    url = f"sqlite:///{tmp_path / 'compat.db'}"
    monkeypatch.setenv("COMPAT_DATABASE_URL", url)
    get_settings.cache_clear()
    rows = [r for r in corpus_rows() if r.model_id == "meta-llama/Llama-3.1-8B-Instruct"]
    run_models(prepare_models(rows), resolve_device("cpu"), ["load", "forward", "generate"], jobs=0, store=Store(url))
    res = CliRunner().invoke(app, ["lookup", "someone/llama-finetune", "--hub", "--json"])
    assert res.exit_code == 0, res.output
    answer = json.loads(res.output)
    assert answer["verdict"] == "supported" and answer["architecture"] == "LlamaForCausalLM"
    assert answer["basis"].startswith("the architecture's verdict")
    assert "intermediate_size: 14336 -> 11008" in answer["differs_in"]  # the corpus model's vs this one's
    assert answer["plan"]["basis"] == "planned from config.json, not run" and answer["plan"]["tensor_parallel"] == 1
    assert any("/someone/llama-finetune/resolve/main/config.json" in p for _, p, _ in fake_hub.requests)
    never_swept = CliRunner().invoke(app, ["lookup", "mistralai/Mistral-7B-v0.1", "--hub"])
    assert never_swept.exit_code == 1 and "never swept" in never_swept.output
    missing = CliRunner().invoke(app, ["lookup", "gone/no-config", "--hub"])
    assert missing.exit_code == 1 and "cannot be read from the Hub" in missing.output
