"""The hub source against a local fake of the Hub API: ranking, representatives, remote code, bad input."""

from __future__ import annotations

import json

import pytest

from worker.catalog.catalog import CatalogError
from worker.catalog.hub import (
    MAX_CONFIG_BYTES,
    HubError,
    fetch_config,
    hub_catalog,
    resolve_endpoint,
    validate_config,
    validate_model_id,
    validate_revision,
)
from worker.catalog.load import load_catalog, refresh_snapshot


def test_hub_catalog_ranks_by_summed_downloads(fake_hub):
    calls = []
    catalog = hub_catalog(100, endpoint=fake_hub.endpoint, progress=lambda d, t, w: calls.append((d, t)))
    by_name = {e.name: e for e in catalog.entries}
    # Llama: 900 + 700 (two repos); Mistral: 800 + 200 (one with a native-type auto_map); remote: 650.
    assert catalog.names()[:3] == ["LlamaForCausalLM", "MistralForCausalLM", "FancyForCausalLM"]
    assert by_name["LlamaForCausalLM"].downloads == 1600
    assert by_name["MistralForCausalLM"].downloads == 1000
    assert by_name["LlamaForCausalLM"].representative == "meta-llama/Llama-3.1-8B-Instruct"
    assert by_name["LlamaForCausalLM"].config["rope_scaling"]["rope_type"] == "llama3"
    assert [e.rank for e in catalog.entries] == list(range(1, len(catalog.entries) + 1))
    # Progress reached every listed model, in order.
    assert calls[-1] == (len(fake_hub.models), len(fake_hub.models))
    assert [d for d, _ in calls] == list(range(1, len(fake_hub.models) + 1))


def test_remote_code_is_kept_and_flagged(fake_hub):
    by_name = {e.name: e for e in hub_catalog(100, endpoint=fake_hub.endpoint).entries}
    assert by_name["FancyForCausalLM"].remote_code  # auto_map and a model_type transformers lacks
    assert by_name["TotallyNewForCausalLM"].remote_code  # class unknown to the installed transformers
    # An auto_map next to a native model_type loads natively: not remote code.
    assert not by_name["MistralForCausalLM"].remote_code
    assert not by_name["LlamaForCausalLM"].remote_code


def test_bad_models_are_skipped_with_reasons(fake_hub):
    catalog = hub_catalog(100, endpoint=fake_hub.endpoint)
    skipped = dict(catalog.skipped)
    assert set(skipped) == {"broken/malformed", "gone/no-config", "bad/huge-hidden"}
    assert "not JSON" in skipped["broken/malformed"]
    assert "hidden_size" in skipped["bad/huge-hidden"]
    assert "404" in skipped["gone/no-config"] or "NotFound" in skipped["gone/no-config"]


def test_listing_follows_pagination_and_honours_limit(fake_hub):
    catalog = hub_catalog(3, endpoint=fake_hub.endpoint)  # the 3 most-downloaded models: 2 llama, 1 mistral
    assert catalog.names() == ["LlamaForCausalLM", "MistralForCausalLM"]
    assert catalog.entries[0].downloads == 1600
    fake_hub.requests.clear()
    hub_catalog(100, endpoint=fake_hub.endpoint)  # 9 models, pages of 4: three listing requests
    listing = [path for _, path, _ in fake_hub.requests if path.startswith("/api/models")]
    assert len(listing) == 3
    assert "pipeline_tag=text-generation" in listing[0] and "sort=downloads" in listing[0]


def test_endpoint_defaults_to_hf_endpoint(fake_hub, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", fake_hub.endpoint + "/")
    assert resolve_endpoint() == fake_hub.endpoint
    assert hub_catalog(2).names()[0] == "LlamaForCausalLM"


def test_refresh_writes_a_snapshot_the_snapshot_source_reads(fake_hub, isolated_settings):
    fresh = refresh_snapshot(limit=100, endpoint=fake_hub.endpoint)
    payload = json.loads(isolated_settings.snapshot_path.read_text())
    assert payload["endpoint"] == fake_hub.endpoint and payload["limit"] == 100
    fake_hub.requests.clear()
    offline = load_catalog("snapshot")
    assert not fake_hub.requests  # the snapshot source never touches the network
    assert offline.entries == fresh.entries
    assert offline.snapshot_id == fresh.snapshot_id
    assert load_catalog("auto", limit=2).names() == fresh.names()[:2]


def test_failing_hub_listing_is_a_catalog_error(fake_hub):
    # 403 is not retried by huggingface_hub (connection errors are, with seconds of backoff: too slow for a test).
    fake_hub.list_status = 403
    with pytest.raises(CatalogError, match="cannot list models"):
        hub_catalog(5, endpoint=fake_hub.endpoint)


@pytest.mark.parametrize("model_id", ["org/name", "name", "Org-1/Model_2.5-it"])
def test_valid_model_ids(model_id):
    assert validate_model_id(model_id) == model_id


@pytest.mark.parametrize("model_id", ["../etc/passwd", "a/b/c", "org--x/y", "x" * 97, "", None, "org/.hidden",
                                      "org/name.git", "org/na me"])
def test_invalid_model_ids(model_id):
    with pytest.raises(HubError):
        validate_model_id(model_id)


@pytest.mark.parametrize("revision, ok", [("main", True), ("v1.0", True), ("a" * 40, True), ("refs/pr/1", True),
                                          ("../../x", False), ("-rf", False), ("", False), ("a b", False)])
def test_revisions(revision, ok):
    if ok:
        assert validate_revision(revision) == revision
    else:
        with pytest.raises(HubError):
            validate_revision(revision)


def test_config_validation_refuses_before_use():
    good = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64}
    assert validate_config(json.dumps(good).encode()) == good
    with pytest.raises(HubError, match="over"):
        validate_config(b" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(HubError, match="architectures"):
        validate_config(json.dumps({**good, "architectures": "LlamaForCausalLM"}).encode())
    with pytest.raises(HubError, match="architectures"):
        validate_config(json.dumps({**good, "architectures": ["os.system('x')"]}).encode())
    with pytest.raises(HubError, match="model_type"):
        validate_config(json.dumps({**good, "model_type": 3}).encode())
    with pytest.raises(HubError, match="vocab_size"):
        validate_config(json.dumps({**good, "vocab_size": "big"}).encode())
    with pytest.raises(HubError, match="auto_map"):
        validate_config(json.dumps({**good, "auto_map": ["x"]}).encode())


def test_fetch_config_validates_the_id_before_any_request(fake_hub):
    with pytest.raises(HubError):
        fetch_config("../secret", endpoint=fake_hub.endpoint)
    assert not fake_hub.requests
    assert fetch_config("mistralai/Mistral-7B-v0.1", endpoint=fake_hub.endpoint)["sliding_window"] == 4096
    method, path, _ = fake_hub.requests[-1]
    assert (method, path) == ("GET", "/mistralai/Mistral-7B-v0.1/resolve/main/config.json")
