"""The Hub side of the catalog: list text-generation models by downloads, fetch and validate their config.json.

Speaks only through ``huggingface_hub`` (``HfApi.list_models`` and its HTTP session) at ``HF_ENDPOINT`` or an
explicit endpoint; every id, revision and config is validated before use, and nothing here executes remote code.
"""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import httpx2  # huggingface_hub 2.x's HTTP client (get_session); its errors are its own, not httpx's
import transformers
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from compat.native import CodeVerdict, registry_of, remote_code_verdict
from compat.results import ArchitectureEntry
from worker.catalog.catalog import Catalog, CatalogError, Progress

log = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 1024 * 1024  # real config.json files are a few KB; a 1 MiB cap refuses junk before parsing it
MAX_DIM = 10_000_000  # no size field of a real config is larger (vocab ~ 256k, hidden ~ 16k, positions ~ 10M)
FETCH_WORKERS = 8
# Hub naming rules (huggingface_hub.utils.validate_repo_id, plus the Hub's 96-character name limit).
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
_REVISION = re.compile(r"^[A-Za-z0-9][\w.\-/]{0,99}$")
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_MODEL_TYPE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SIZE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "n_embd", "n_layer", "n_head", "d_model")


class HubError(CatalogError):
    """A Hub answer this harness refuses (bad id, bad revision, oversized or malformed config)."""


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The Hub endpoint: the argument, else ``HF_ENDPOINT`` as huggingface_hub read it, without a trailing slash."""
    return (endpoint or constants.ENDPOINT).rstrip("/")


def validate_model_id(model_id: Any) -> str:
    """``model_id`` if it follows the Hub's naming rules ("org/name"), else HubError."""
    if not isinstance(model_id, str) or not _REPO_ID.match(model_id) or "--" in model_id or ".." in model_id \
            or model_id.endswith(".git"):
        raise HubError(f"invalid Hub model id {model_id!r}")
    return model_id


def validate_revision(revision: Any) -> str:
    """A branch, tag or commit name the Hub would accept; refuses path tricks (``..``) and odd characters."""
    if not isinstance(revision, str) or not _REVISION.match(revision) or ".." in revision or "//" in revision:
        raise HubError(f"invalid revision {revision!r}")
    return revision


def validate_config(raw: bytes, model_id: str = "?") -> dict[str, Any]:
    """Parse and check a config.json: size cap, a JSON object, sane ``architectures``/``model_type``/sizes."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise HubError(f"{model_id}: config.json is over {MAX_CONFIG_BYTES} bytes")
    try:
        config = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HubError(f"{model_id}: config.json is not JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise HubError(f"{model_id}: config.json is not a JSON object")
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) and _CLASS_NAME.match(a)
                                                           for a in archs):
        raise HubError(f"{model_id}: config.json has no valid 'architectures' list")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not _MODEL_TYPE.match(model_type):
        raise HubError(f"{model_id}: config.json has no valid 'model_type'")
    for name in _SIZE_FIELDS:
        value = config.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_DIM):
            raise HubError(f"{model_id}: config.json field {name}={value!r} is not a positive int <= {MAX_DIM}")
    auto_map = config.get("auto_map")
    if auto_map is not None and not isinstance(auto_map, dict):
        raise HubError(f"{model_id}: config.json 'auto_map' is not an object")
    return config


def fetch_config(model_id: str, *, endpoint: str, revision: str = "main", timeout: float = 30.0) -> dict[str, Any]:
    """Download ``config.json`` of a model (streamed, capped at MAX_CONFIG_BYTES) and validate it."""
    validate_model_id(model_id)
    validate_revision(revision)
    # The Hub's file URL scheme, as huggingface_hub.hf_hub_url builds it (revision quoted whole: "refs%2Fpr%2F1").
    url = f"{endpoint.rstrip('/')}/{model_id}/resolve/{quote(revision, safe='')}/config.json"
    chunks: list[bytes] = []
    size = 0
    try:
        with get_session().stream("GET", url, headers=build_hf_headers(), timeout=timeout,
                                  follow_redirects=True) as response:
            hf_raise_for_status(response)
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_CONFIG_BYTES:
                    raise HubError(f"{model_id}: config.json is over {MAX_CONFIG_BYTES} bytes")
                chunks.append(chunk)
    except (httpx2.TransportError, OfflineModeIsEnabled) as exc:
        # Offline, DNS ("Name or service not known"), refused, timed out: the Hub was not reached, said so.
        raise HubError(unreachable(model_id, endpoint, exc)) from None
    return validate_config(b"".join(chunks), model_id)


def unreachable(model_id: str, endpoint: str, exc: BaseException) -> str:
    """Why a Hub id's config.json could not be read when the Hub itself could not be reached, and what to do."""
    why = "HF_HUB_OFFLINE is set" if isinstance(exc, OfflineModeIsEnabled) else (
        f"{type(exc).__name__}: {str(exc)[:120]}" if str(exc) else type(exc).__name__)
    return (f"{model_id}: cannot reach the Hub at {endpoint} to read its config.json ({why}); upload the model's "
            "config.json instead, or set HF_ENDPOINT to a Hub this server can reach")


def list_text_generation(limit: int, *, endpoint: str) -> list[tuple[str, int]]:
    """(model id, downloads) of the ``limit`` most-downloaded text-generation models, most downloaded first."""
    try:
        models = list(HfApi(endpoint=endpoint).list_models(pipeline_tag="text-generation", sort="downloads",
                                                           limit=limit))
    except Exception as exc:  # noqa: BLE001 - any transport/HTTP error becomes one clear catalog error
        raise CatalogError(f"cannot list models at {endpoint}: {type(exc).__name__}: {exc}") from exc
    return [(m.id, int(m.downloads or 0)) for m in models]


def code_verdict(config: dict[str, Any]) -> CodeVerdict:
    """``compat.native``'s remote-code rule against the installed Transformers."""
    return remote_code_verdict(config, registry_of(transformers))


def needs_remote_code(config: dict[str, Any]) -> bool:
    """Remote code is needed when the installed Transformers has no native class for the architecture or no
    native config class for the model_type (``compat.native.remote_code_verdict``); an auto_map alone never is."""
    return code_verdict(config).remote_code


def rank_architectures(models: list[tuple[str, int, dict[str, Any]]]) -> list[ArchitectureEntry]:
    """Group (model id, downloads, config) by ``architectures[0]``; rank by summed downloads.

    Each architecture's representative is its most-downloaded model (first listed on a tie); its config is the
    one that gets shrunk.
    """
    groups: dict[str, dict[str, Any]] = {}
    for model_id, downloads, config in models:
        name = config["architectures"][0]
        group = groups.setdefault(name, {"downloads": 0, "best": None})
        group["downloads"] += downloads
        if group["best"] is None or downloads > group["best"][1]:
            group["best"] = (model_id, downloads, config)
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1]["downloads"], kv[0]))
    entries = []
    for rank, (name, group) in enumerate(ordered, start=1):
        model_id, _, config = group["best"]
        verdict = code_verdict(config)
        entries.append(ArchitectureEntry(
            name=name, model_type=config["model_type"], rank=rank, downloads=group["downloads"],
            representative=model_id, remote_code=verdict.remote_code, config=config,
            notes=[f"remote code: {verdict.reason}"] if verdict.remote_code else list(verdict.notes),
        ))
    return entries


def hub_catalog(limit: int, *, endpoint: str | None = None, progress: Progress | None = None,
                workers: int = FETCH_WORKERS) -> Catalog:
    """List ``limit`` text-generation models, read their configs in parallel, and rank their architectures.

    Models whose id or config fails validation (or cannot be fetched) are left out and listed in
    ``Catalog.skipped`` with the reason; the rest still make the catalog.
    """
    endpoint = resolve_endpoint(endpoint)
    listed = list_text_generation(limit, endpoint=endpoint)
    total = len(listed)
    done = 0
    fetched: list[tuple[str, int, dict[str, Any]]] = []
    skipped: list[tuple[str, str]] = []

    def one(item: tuple[str, int]) -> tuple[str, int, dict[str, Any] | None, str | None]:
        model_id, downloads = item
        try:
            return model_id, downloads, fetch_config(model_id, endpoint=endpoint), None
        except Exception as exc:  # noqa: BLE001 - one bad model must not sink the catalog
            return model_id, downloads, None, f"{type(exc).__name__}: {str(exc)[:200]}"

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for model_id, downloads, config, error in pool.map(one, listed):  # map keeps listing order
            done += 1
            if config is None:
                log.warning("catalog: skipping %s: %s", model_id, error)
                skipped.append((model_id, error or "unknown error"))
            else:
                fetched.append((model_id, downloads, config))
            if progress:
                progress(done, total, model_id)
    return Catalog(source="hub", snapshot_id=None, entries=rank_architectures(fetched), skipped=skipped)
