"""Fixtures of the catalog tests: a local fake of the Hub's HTTP API.

The fake speaks exactly what huggingface_hub 2.4.0 sends for ``HfApi.list_models`` (GET /api/models with
pipeline_tag/sort/limit, paginated with a GitHub-style Link header) and for file downloads
(GET /{repo_id}/resolve/{revision}/config.json). It listens on 127.0.0.1 on a random port; nothing leaves the host.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
         "vocab_size": 128256, "max_position_embeddings": 131072, "bos_token_id": 128000, "eos_token_id": 128001,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192},
         "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
MISTRAL = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
           "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
           "vocab_size": 32000, "sliding_window": 4096, "max_position_embeddings": 32768}
REMOTE = {"architectures": ["FancyForCausalLM"], "model_type": "fancy", "hidden_size": 1024,
          "auto_map": {"AutoConfig": "configuration_fancy.FancyConfig",
                       "AutoModelForCausalLM": "modeling_fancy.FancyForCausalLM"}}
UNKNOWN_CLASS = {"architectures": ["TotallyNewForCausalLM"], "model_type": "llama", "hidden_size": 512}
NATIVE_WITH_AUTO_MAP = {**MISTRAL, "auto_map": {"AutoConfig": "configuration_mistral.MistralConfig"}}

# (model id, downloads, config.json body as bytes or None for 404)
FIXTURE_MODELS: list[tuple[str, int, bytes | None]] = [
    ("meta-llama/Llama-3.1-8B-Instruct", 900, json.dumps(LLAMA).encode()),
    ("mistralai/Mistral-7B-v0.1", 800, json.dumps(MISTRAL).encode()),
    ("someone/llama-finetune", 700, json.dumps(LLAMA).encode()),
    ("remote/fancy-model", 650, json.dumps(REMOTE).encode()),
    ("broken/malformed", 600, b'{"architectures": ["LlamaForCausalLM"], "model_type": '),
    ("weird/unknown-class", 500, json.dumps(UNKNOWN_CLASS).encode()),
    ("gone/no-config", 400, None),
    ("bad/huge-hidden", 300, json.dumps({**MISTRAL, "hidden_size": 10**12}).encode()),
    ("community/mistral-automap", 200, json.dumps(NATIVE_WITH_AUTO_MAP).encode()),
]


def fixture_sha(model_id: str) -> str:
    """The commit sha the fake lists for a model (a 40-hex digest of its id) and serves its config at."""
    return hashlib.sha1(model_id.encode()).hexdigest()


def fixture_trending(model_id: str) -> float:
    """The fake's trending score: the reverse of the downloads order (less downloaded trends more), so the two
    sorts differ."""
    return float(1000 - next(dl for mid, dl, _ in FIXTURE_MODELS if mid == model_id))


class FakeHub:
    """The Hub subset huggingface_hub uses for listing models and downloading a config file."""

    def __init__(self, models: list[tuple[str, int, bytes | None]], page_size: int = 4) -> None:
        self.models = models
        self.page_size = page_size
        self.list_status: int | None = None  # set to make the listing endpoint fail with this HTTP status
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path+query, headers)
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                hub.requests.append(("GET", self.path, dict(self.headers)))
                url = urlparse(self.path)
                if url.path == "/api/models":
                    self._list(parse_qs(url.query))
                elif "/resolve/" in url.path:
                    self._file(url.path)
                else:
                    self._send(404, b'{"error": "not found"}')

            def _list(self, query: dict[str, list[str]]) -> None:
                if hub.list_status is not None:
                    self._send(hub.list_status, b'{"error": "denied"}')
                    return
                sort = (query.get("sort") or [""])[0]
                if query.get("pipeline_tag") != ["text-generation"] or sort not in ("downloads", "trendingScore"):
                    self._send(400, b'{"error": "unexpected query"}')
                    return
                limit = int(query.get("limit", ["1000"])[0])
                start = int(query.get("cursor", ["0"])[0])
                score = (lambda m: -m[1]) if sort == "downloads" else (lambda m: -fixture_trending(m[0]))
                ranked = sorted(hub.models, key=score)[:limit]
                page = ranked[start:start + hub.page_size]
                body = json.dumps([{"id": mid, "_id": mid, "modelId": mid, "downloads": dl, "sha": fixture_sha(mid),
                                    "trendingScore": fixture_trending(mid), "pipeline_tag": "text-generation",
                                    "tags": []} for mid, dl, _ in page])
                headers = {}
                if start + hub.page_size < len(ranked):
                    nxt = dict(limit=limit, pipeline_tag="text-generation", sort=sort,
                               cursor=start + hub.page_size)
                    headers["Link"] = f'<{hub.endpoint}/api/models?{urlencode(nxt)}>; rel="next"'
                self._send(200, body.encode(), headers)

            def _file(self, path: str) -> None:
                repo, _, rest = path.lstrip("/").partition("/resolve/")
                revision, _, filename = rest.partition("/")
                match = next((m for m in hub.models if m[0] == repo), None)
                if match is None or match[2] is None or filename != "config.json" or \
                        revision not in ("main", fixture_sha(repo)):
                    self._send(404, b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound"})
                    return
                self._send(200, match[2], {"X-Repo-Commit": "0" * 40, "ETag": '"fixture"'})

            def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_hub():
    with FakeHub(FIXTURE_MODELS) as hub:
        yield hub
