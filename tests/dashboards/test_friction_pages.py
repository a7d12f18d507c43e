"""The pages' share of issue 30's friction list, server-rendered (no browser): ``/matrix?status=bogus`` refused as the
API refuses it, the matrix's order said truly over an unranked registry, "1 architecture", and the submit form's
remote-code wording; and the overview's source links (``dashboards.sources``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from live_server import make_app

from compat.results import DEFAULT_CHECKS, ArchitectureEntry, DeviceInfo, ResultRecord, RunInfo, Status
from dashboards.sources import source_link


@pytest.fixture
def client(tmp_path) -> Iterator[object]:  # noqa: ANN001
    """A TestClient over a store holding one full run of one architecture from Transformers' registry (unranked)."""
    from fastapi.testclient import TestClient

    from service.store import Store

    url = f"sqlite:///{tmp_path / 'one.db'}"
    store = Store(url)
    catalog = [ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1)]
    run = RunInfo(device=DeviceInfo(name="cpu"), started=datetime.now(UTC), catalog_source="registry")
    store.start_run(run, catalog, [("LlamaForCausalLM", "cpu", str(c)) for c in DEFAULT_CHECKS])
    store.add_results(run.id, [ResultRecord(architecture="LlamaForCausalLM", rank=1, device="cpu", check=c,
                                            status=Status.PASS) for c in DEFAULT_CHECKS])
    store.finish_run(run.id)
    with TestClient(make_app(url)) as c:
        yield c


def test_an_unknown_status_filter_is_refused_like_the_api(client) -> None:  # noqa: ANN001
    api = client.get("/api/v1/architectures?status=bogus")
    page = client.get("/matrix?status=bogus")
    assert api.status_code == 422 and page.status_code == 422  # the page showed everything, silently
    assert "unknown status filter &#39;bogus&#39;; use one of: supported, not_supported, failing" in page.text
    assert 'data-arch="LlamaForCausalLM"' not in page.text
    assert client.get("/matrix?status=unsupported").status_code == 200  # the API's alias is read here too


def test_the_matrix_says_its_order_and_counts_one_architecture(client) -> None:  # noqa: ANN001
    html = client.get("/matrix").text
    assert "Hub-rank order" not in html  # the registry is not ranked by the Hub
    assert "in Transformers' registry order (unranked, alphabetical" in html
    assert "</strong> of 1 architecture</p>" in html
    assert "1 architectures" not in html


def test_the_submit_form_says_which_configs_are_refused(client) -> None:  # noqa: ANN001
    html = client.get("/submit").text
    assert "configs with <code>auto_map</code> (remote code) are refused" not in html
    assert "not native to the installed Transformers (remote code) is refused" in html
    assert "<code>auto_map</code> next to native classes is ignored" in html


@pytest.mark.parametrize(("ref", "label", "href", "note"), [
    ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html "
     "(rst date-modified 10/19/2026)",
     "awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html",
     "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html",
     "rst date-modified 10/19/2026"),
    ("github.com/arminagha1234/trainium-optimizer @ 0a1719dd4a9c105b549c8c735cd76f0453cb780e: HISTORY.tsv",
     "arminagha1234/trainium-optimizer · HISTORY.tsv @ 0a1719d",
     "https://github.com/arminagha1234/trainium-optimizer/blob/0a1719dd4a9c105b549c8c735cd76f0453cb780e/HISTORY.tsv",
     ""),
    ("github.com/parmoham-aws/test-repo-parmoham @ 98154b867aa24562a3213e520d9ad7fd41032291: "
     "torch_neuronx/python_ops/grouped_mm.py:12-50, torch_neuronx/utils.py:119-134",
     "parmoham-aws/test-repo-parmoham @ 98154b8",
     "https://github.com/parmoham-aws/test-repo-parmoham/tree/98154b867aa24562a3213e520d9ad7fd41032291",
     "torch_neuronx/python_ops/grouped_mm.py:12-50, torch_neuronx/utils.py:119-134"),
    ("a source without a link", "a source without a link", None, ""),
])
def test_a_source_reference_becomes_a_valid_link_and_its_note(ref: str, label: str, href: str | None,
                                                              note: str) -> None:
    link = source_link(ref)
    assert (link.label, link.href, link.note) == (label, href, note)
