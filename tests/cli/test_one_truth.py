"""One store, one set of numbers: the CLI (sweep summary, gate, `compat blockers`, `compat show`), the REST API and
the pages read the same headline share, counts, blockers ("unlocks") and regressions (issue 12: four headlines).

The store is filled by real `compat sweep` commands (in-process, a stand-in runner: no model is built), over a
ranked five-architecture snapshot: a nightly, a second nightly with regressions, a fix, a no-verdict result and two
blocking ops, then a one-architecture selection that must not become the headline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_runner import write_plan
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli.app import app
from cli.console import console
from cli.serve import create_app
from compat.results import ArchitectureEntry
from compat.settings import get_settings
from worker.catalog.catalog import Catalog, write_snapshot

A, B, C, D, E = ("LlamaForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel", "MistralForCausalLM",
                 "MixtralForCausalLM")
HISTC, CUMSUM = "aten::histc (Long)", "aten::cumsum (Int)"
FIRST = {E: {"forward": ["unsupported_op", HISTC]}}
# A regresses on histc; B regresses on histc (forward: its first blocker) and cumsum (generate); C's load
# ends harness_error (no verdict: "missing", never a regression); E is fixed; D passes throughout, now with one op
# on the CPU fallback (supported out of the box, not natively).
SECOND = {A: {"forward": ["unsupported_op", HISTC]},
          B: {"forward": ["unsupported_op", HISTC], "generate": ["unsupported_dtype", CUMSUM]},
          C: {"load": ["harness_error", None]},
          D: {"generate": ["pass", None, ["aten::cumsum (Long)"]]}}
runner = CliRunner()


@pytest.fixture
def store_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    snapshot = tmp_path / "snapshot.json"
    write_snapshot(Catalog(source="hub", snapshot_id=None, entries=[
        ArchitectureEntry(name=n, model_type=n.lower(), rank=i) for i, n in enumerate((A, B, C, D, E), 1)]),
        snapshot, endpoint="test", limit=5)
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_CATALOG_SOURCE": "snapshot", "COMPAT_CATALOG_SNAPSHOT": str(snapshot),
                 "COMPAT_RUN_HOOK": "fake_runner:run", "FAKE_RUNNER_PLAN": str(tmp_path / "plan.json"),
                 "COMPAT_DEVICE": "cpu", "COLUMNS": "200"}.items():
        monkeypatch.setenv(k, v)
    # The CLI's console took its width when first imported (another test's terminal): give it the wide one.
    monkeypatch.setattr(console, "width", 200)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _cli(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def _sweep(tmp: Path, plan: dict, *args: str) -> str:
    write_plan(tmp / "plan.json", tmp / "markers", plan)
    return _cli("sweep", "--device", "cpu", "--jobs", "0", "--trigger", "nightly", *args)


def test_cli_api_and_pages_read_the_same_numbers(store_env: Path) -> None:
    _sweep(store_env, FIRST)
    second = _sweep(store_env, SECOND, "--baseline", "last-nightly")
    selection = _sweep(store_env, {}, "--arch", D)

    # CLI: the sweep's summary and its gate line.
    headline = re.search(r"run \w+ on cpu: (\d+) / (\d+) supported \((\d+\.\d%)\); (.+)", second)
    share = headline.group(3)
    caption = " ".join(second.split())  # rich wraps the table's caption
    counted = re.search(r"(\d+) architectures: (\d+) supported natively, (\d+) with CPU fallback", caption)
    assert f"({share} supported;" in caption
    gate = re.search(r"run (\w+) vs baseline (\w+): (\d+) regression\(s\) in (\d+) architecture\(s\), (\d+) fix",
                     caption)
    run2, run1 = gate.group(1), gate.group(2)
    cli_regressed_checks, cli_regressed_archs, cli_fixes = (int(gate.group(i)) for i in (3, 4, 5))
    assert "selection of 1 architecture(s), not the headline" in selection
    assert headline.group(4).startswith("Hub ranking by downloads, snapshot ")
    # CLI: blockers of the device's headline run, as a table (op, blocks, unlocks).
    blocked = _cli("blockers")
    cli_blockers = [(op, int(n), u) for op, n, u in
                    re.findall(r"│\s*\d+\s*│\s*(aten::\w+)\s*│\s*(\d+)\s*│\s*(\d+|\?)\s*│", blocked.split(
                        "ops on the CPU fallback")[0])]
    cli_chains = re.findall(r"│\s*(\w+)\s*│\s*(aten::\w+ \(\w+\) → \?)", blocked)
    cli_fallback = re.findall(r"implement (aten::\w+) natively to take (\d+) architecture\(s\) off the CPU", blocked)
    report = re.search(r"out of the box (\d+) / (\d+) \(([\d.]+%)\), native (\d+) / \d+ \(([\d.]+%)\), "
                       r"failing (\d+)", second).groups()
    shown = _cli("show", B, "--device", "cpu")

    with TestClient(create_app(get_settings())) as client:
        cov = client.get("/api/v1/coverage", params={"device": "cpu"}).json()["items"][0]
        top = client.get("/api/v1/coverage", params={"device": "cpu", "top_n": 5}).json()["items"][0]
        got = client.get("/api/v1/blockers", params={"device": "cpu"}).json()
        api_blockers, fallback = got["items"], got["fallback"]
        diff = client.get("/api/v1/diff", params={"a": run1, "b": run2}).json()
        devices = client.get("/api/v1/devices").json()
        overview = client.get("/").text
        blockers_page = client.get("/blockers", params={"device": "cpu"}).text
        run_page = client.get(f"/runs/{run2}").text

    # The headline: run 2 (the newest full run), not the later selection.
    assert cov["run_id"] == run2 and devices[0]["last_run_id"] == run2 and cov["scope"] == "full"
    assert (int(counted.group(1)), int(counted.group(2)) + int(counted.group(3))) == (cov["total"], cov["supported"])
    assert (int(headline.group(1)), int(headline.group(2))) == (cov["supported"], cov["total"])
    assert (cov["supported"], cov["total"], cov["percent"]) == (2, 5, share) == (2, 5, "40.0%")
    assert top["top_n"] == 5 and top["percent"] == share
    page_share = re.search(r'data-headline="top">([\d.]+%)', overview).group(1)
    page_all = re.search(r'data-metric="all">(\d+) / (\d+) \(([\d.]+%)\)', overview).groups()
    assert page_share == share and page_all == (str(cov["supported"]), str(cov["total"]), share)
    run_card = re.search(r'<h3>Supported</h3><div class="big">([\d.]+%)</div>', run_page).group(1)
    assert run_card == share

    # The device report: out of the box, native, failing.
    assert report == (str(cov["supported"]), str(cov["total"]), cov["percent"], str(cov["native"]),
                      cov["native_percent"], str(cov["failing"])) == ("2", "5", "40.0%", "1", "20.0%", "2")
    page_report = re.search(r'data-metric="out-of-box">(\d+) / (\d+) \(([\d.]+%)\)</span> · native '
                            r'<span data-metric="native">(\d+) / \d+ \(([\d.]+%)\)</span> · failing '
                            r'<span data-metric="failing">(\d+)<', overview).groups()
    assert page_report == report

    # Blockers: on cpu no op can be moved to the CPU fallback, so only the first blocker is known (the first failing
    # support check's op: B's forward histc, not its generate cumsum) and "unlocks" is unknown ("?", null), never
    # guessed; ops on the CPU fallback and how many architectures each takes off the CPU.
    assert cli_blockers == [(b["op"], b["count"], "?" if b["unlocks"] is None else str(len(b["unlocks"])))
                            for b in api_blockers] == [("aten::histc", 2, "?")]
    assert got["measured"] is False and "only the first blocker is known" in got["note"]
    assert "only the first blocker is known" in " ".join(blocked.split())
    assert sorted(cli_chains) == sorted((c["architecture"], c["text"].split(" (only")[0]) for c in got["chains"]) == [
        (A, "aten::histc (Long) → ?"), (B, "aten::histc (Long) → ?")]
    page_rows = re.findall(r'data-op="(aten::\w+)".*?data-count>(\d+)</td>\s*<td class="num" data-unlocks>(\d+|\?)<',
                           blockers_page, re.S)
    assert [(op, int(n), u) for op, n, u in page_rows] == cli_blockers
    assert re.findall(r'data-chain="(\w+)" data-end="unknown"', blockers_page) == [A, B]
    api_fallback = [(f["op"], str(len(f["offloads"]))) for f in fallback]
    assert cli_fallback == api_fallback == [("aten::cumsum", "1")]
    page_fallback = re.findall(r'data-fallback-op="(aten::\w+)".*?data-offloads>(\d+)<', blockers_page, re.S)
    assert page_fallback == api_fallback

    # Regressions: 3 checks in 2 architectures (A, B); C's harness_error is missing, not a regression; E fixed.
    assert (cli_regressed_checks, cli_regressed_archs, cli_fixes) == (3, 2, 1)
    assert (diff["regressed_checks"], len(diff["regressions"]), diff["fixed_checks"]) == (3, 2, 1)
    assert [e["architecture"] for e in diff["regressions"]] == [A, B] and diff["missing_checks"] == 1
    page_diff = re.search(r'data-regressions="(\d+)" data-regressed-checks="(\d+)"', overview).groups()
    assert page_diff == (str(len(diff["regressions"])), str(diff["regressed_checks"]))

    # `compat show` reads the same latest results the API's architecture page does.
    assert "unsupported_dtype" in shown and "aten::cumsum (Int)" in shown


def test_over_the_registry_the_cli_and_the_pages_say_unranked_and_show_no_top_n(store_env: Path) -> None:
    out = _sweep(store_env, {}, "--source", "registry")  # every registry architecture passes (stand-in runner)
    headline = re.search(r"run \w+ on cpu: (\d+) / (\d+) supported \(([\d.]+%)\); (.+)", out)
    assert headline.group(4) == "unranked: Transformers' registry, alphabetical"
    with TestClient(create_app(get_settings())) as client:
        cov = client.get("/api/v1/coverage", params={"device": "cpu", "top_n": 10}).json()["items"][0]
        overview = client.get("/").text
    assert (cov["top_n"], cov["ranked"], str(cov["total"]), cov["percent"]) == (
        None, False, headline.group(2), headline.group(3))
    assert "unranked: Transformers&#39; registry, alphabetical" in overview
    assert 'data-headline="top"' not in overview and "of the top" not in overview
