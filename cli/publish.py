"""``compat publish --repo ORG/NAME``: the per-model and per-architecture tables as a Hub dataset, through
``huggingface_hub``: two parquet files and a dataset card (the method, the date, the versions, the simulation
caveat). That is how the vendor's own table is shared; ``HF_ENDPOINT`` (or ``--endpoint``) picks the Hub.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from huggingface_hub import HfApi

from cli.console import console, fail
from compat.model_rows import valid_model_id
from compat.plan import BASIS
from compat.settings import get_settings
from service import model_queries, queries
from service.store import Store

MODELS_FILE = "models.parquet"
ARCHITECTURES_FILE = "architectures.parquet"


def tables(store: Store, device: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """(per-model rows, per-architecture rows, the per-model headline) read through the same queries as the API."""
    with store.session() as s:
        pairs = model_queries.list_models(s, device)
        head = model_queries.headline(s, device)
        archs = queries.list_architectures(s, device=device, per_page=500).items if pairs else []
    models = [{"model_id": r.model_id, "sha": r.sha, "architecture": r.architecture, "judged_as": r.judged_as,
               "catalog": r.catalog, "device": a.device, "verdict": a.verdict, "refusal": r.refusal,
               "checks": ",".join(f"{c}={v.status}" for c, v in a.checks.items()), "run_id": r.run_id,
               "parameters": (a.plan or {}).get("parameters"), "dtype": (a.plan or {}).get("dtype"),
               "weight_bytes": (a.plan or {}).get("weight_bytes"),
               "kv_cache_bytes": (a.plan or {}).get("kv_cache_bytes"),
               "tensor_parallel": (a.plan or {}).get("tensor_parallel"),
               "neuron_cores": (a.plan or {}).get("neuron_cores"), "instance": (a.plan or {}).get("instance"),
               "plan_basis": (a.plan or {}).get("basis")} for r, a in pairs]
    arch = [{"architecture": a.name, "rank": a.rank, "device": a.device, "run_id": a.run_id,
             "supported": a.supported, "fallback": a.fallback,
             "checks": ",".join(f"{c}={v}" for c, v in a.statuses.items())} for a in archs]
    return models, arch, head.text() if head else None


def card(repo: str, headline: str | None, versions: dict[str, str], n_models: int, n_archs: int) -> str:
    date = datetime.now(UTC).date().isoformat()
    version_lines = "\n".join(f"- {k}: {v}" for k, v in sorted(versions.items())) or "- (not recorded)"
    return f"""---
pretty_name: neuron-compat per-model table
configs:
- config_name: models
  data_files: {MODELS_FILE}
- config_name: architectures
  data_files: {ARCHITECTURES_FILE}
---
# {repo}

Per-model and per-architecture results of [neuron-compat](https://github.com/) as of {date}:
{n_models} models, {n_archs} architectures.

{headline or "No per-model headline (no models stored)."}

## Method
Each model's own config.json is shrunk to a tiny random-weight model by the harness's rules and run on the device
under test against a CPU float32 reference (load, forward, generate, train); models whose tiny configs are identical
share one run. The plan columns are {BASIS}: parameters counted on the meta device, weight and KV-cache bytes, the
smallest tensor-parallel degree that fits one NeuronCore, the NeuronCores and the smallest cited instance.

## Caveat
The `neuron` device here is a **simulation** of AWS Trainium (bundled `neuron_backend`), calibrated against public
records of real Trn2 runs; a verdict is the simulation's, not a run on real hardware.

## Versions
{version_lines}
"""


def publish(*, repo: str, endpoint: str | None, token: str | None, device: str | None) -> str:
    if not valid_model_id(repo) or "/" not in repo:
        raise fail(f"invalid dataset repo {repo!r}: expected ORG/NAME")
    store = Store(get_settings().database_url)
    models, archs, headline = tables(store, device)
    if not models:
        raise fail("no models stored; run `compat sweep --models` first", 1)
    with store.session() as s:
        versions = queries.get_run(s, models[0]["run_id"], with_results=False).versions if models[0]["run_id"] \
            else {}
    api = HfApi(endpoint=endpoint, token=token)
    with tempfile.TemporaryDirectory(prefix="compat-publish-") as tmp:
        folder = Path(tmp)
        pq.write_table(pa.Table.from_pylist(models), folder / MODELS_FILE)
        pq.write_table(pa.Table.from_pylist(archs or [{"architecture": None}]), folder / ARCHITECTURES_FILE)
        (folder / "README.md").write_text(card(repo, headline, dict(versions), len(models), len(archs)))
        try:
            api.create_repo(repo, repo_type="dataset", exist_ok=True)
            commit = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset",
                                       commit_message=f"neuron-compat tables: {len(models)} models")
        except Exception as exc:  # noqa: BLE001 - any Hub error is one line, not a traceback
            raise fail(f"cannot publish to {repo}: {type(exc).__name__}: {str(exc)[:300]}", 1) from None
    console.print(f"published {len(models)} models and {len(archs)} architectures to {repo}: {commit}",
                  highlight=False, soft_wrap=True)
    return str(commit)
