"""Issue 18 acceptance, on the real runner and the simulated device: a sweep measures what each decision switch moves,
and a real sweep run with that switch flipped lands exactly there (a fallback-only case: argmax; a failing case: MoE
routing's integer sort behind grouped_mm's preconditions). The headline with its range is one text on the CLI. The same
sweep measures the MoE's blocker chain (issue 30), which agrees with the decisions."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli.app import app
from cli.console import console
from cli.serve import create_app
from compat.coverage import coverage
from compat.decisions import DecisionEffect
from compat.results import ArchitectureEntry, Report
from compat.settings import get_settings
from worker.catalog.catalog import Catalog, write_snapshot

DENSE, MOE = "GPT2LMHeadModel", "MixtralForCausalLM"
PERMISSIVE = {"argmax_device": "native", "grouped_mm_preconditions": "not_enforced", "integer_sort_topk": "runs"}
runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    snapshot = tmp_path / "snapshot.json"
    write_snapshot(Catalog(source="hub", snapshot_id=None, entries=[
        ArchitectureEntry(name=n, model_type=t, rank=i) for i, (n, t) in enumerate(((DENSE, "gpt2"),
                                                                                      (MOE, "mixtral")), 1)]),
        snapshot, endpoint="test", limit=2)
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_CATALOG_SOURCE": "snapshot", "COMPAT_CATALOG_SNAPSHOT": str(snapshot),
                 "COLUMNS": "400",
                 # The CPU reference cache on, as in production (Settings.reference_cache defaults to on), in this
                 # test's own folder: the decision, chain and flipped-switch re-runs read the references the first
                 # sweep stored instead of recomputing them, and nothing another test stored can hit.
                 # tests/worker/run/reference/test_reference_cache.py pins that verdicts do not depend on the cache.
                 "COMPAT_REFERENCE_CACHE": "1", "COMPAT_REFERENCE_CACHE_DIR": str(tmp_path / "reference-cache")}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(console, "width", 400)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _sweep(tmp: Path, name: str, *args: str) -> tuple[str, Report]:
    path = tmp / f"{name}.json"
    res = runner.invoke(app, ["sweep", "--device", "neuron", "--jobs", "0", "--checks", "load,forward,generate",
                              "--json", str(path), *args])
    assert res.exit_code == 0, res.output
    return res.output, Report.model_validate_json(path.read_text())


def _args(archs: list[str]) -> list[str]:
    return [a for arch in archs for a in ("--arch", arch)]


def _counts(report: Report) -> tuple[int, int]:
    cov = coverage(report.results, [e.name for e in report.architectures])
    return cov.supported, cov.native


def test_flipping_a_switch_moves_the_stored_figure_by_what_a_real_rerun_gives(env: Path) -> None:
    out, base = _sweep(env, "base")
    effects = {DecisionEffect(**d).key: DecisionEffect(**d) for d in base.decisions}
    supported, native = _counts(base)
    # On the defaults, the MoE stops at integer sort (NCC_EVRF013) and GPT-2's greedy argmax runs on the CPU.
    assert (supported, native) == (1, 0), out
    headline = re.search(r"headline: (.+)", out).group(1)
    # One decision per low-confidence switch of the profile (6 since issue 32 added integer_matmul_eager and
    # integer_scatter_compute_eager); combinations are measured but not counted as decisions.
    singles = len([k for k in effects if "," not in k])
    assert singles >= 6, sorted(effects)
    assert headline.startswith(f"1 (50.0%) out of the box; 1–2 across {singles} decision(s): ")
    assert "sort/topk/argsort on 32/64-bit integers (medium) moves 0" in headline  # grouped_mm still blocks it

    # One rule, three surfaces: the CLI's headline, the API's range and the overview page read the one stored run.
    with TestClient(create_app(get_settings())) as client:
        cov = client.get("/api/v1/coverage", params={"device": "neuron"}).json()["items"][0]
        page = client.get("/").text
    assert cov["run_id"] == base.run.id and cov["range_text"] == headline
    assert (cov["range_low"], cov["range_high"]) == (1, 2)
    # The overview sets the range on its own line ("1–2 depending on 4 modelling decisions", issue 30) and keeps the
    # one spelling whole in that line's tooltip.
    shown = re.search(r'data-metric="range" title="([^"]+)"><strong[^>]*>([^<]+)</strong> depending on <a[^>]*>([^<]+)<',
                      page)
    assert html.unescape(shown.group(1)) == headline
    assert (shown.group(2), shown.group(3)) == ("1–2", f"{singles} modelling decisions")

    # Blocker chains (issue 30), measured by the same sweep: the MoE re-run with integer sort on the CPU fallback stops
    # at _grouped_mm, and passes with both there; only the pair unlocks it, as the decisions measured below say.
    (chain,) = [c for c in base.chains if c["architecture"] == MOE]
    assert [link["op"] for link in chain["links"]] == ["aten::sort (Int)", "aten::_grouped_mm (Float, Int)"]
    assert chain["end"] == "pass" and [c["architecture"] for c in base.chains] == [MOE]
    res = runner.invoke(app, ["blockers", "--json", str(env / "base.json")])
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "implement aten::sort + aten::_grouped_mm to unlock 1 architecture(s)" in said
    assert "implement aten::sort to unlock" not in said and "chains measured" in said, said

    # Fallback-only: re-judged from the stored fallback ops, then checked against a real sweep with argmax native.
    argmax = effects["argmax_device=native"]
    assert argmax.measured_by == "traces" and argmax.native_gains == [DENSE] and argmax.moves == 0
    # The real re-run runs only what the switch touched (the rest cannot move): the figure is the stored one plus it.
    _, flipped = _sweep(env, "argmax", "--switch", "argmax_device=native", "--no-chains", *_args(argmax.affected))
    assert argmax.affected == [DENSE, MOE]  # both run argmax on the CPU reference; only GPT-2 gets that far
    assert _counts(flipped) == (supported + argmax.moves, native + argmax.native_moves)
    assert flipped.decisions == []  # a run made away from the defaults measures nothing

    # Failing: the MoE moves only when both its failures go; each alone moves nothing. Measured by re-running it.
    both = effects[",".join(f"{k}={v}" for k, v in sorted(PERMISSIVE.items()))]
    assert both.measured_by == "rerun" and both.gains == [MOE]
    assert effects["integer_sort_topk=runs"].moves == 0 and effects["grouped_mm_preconditions=not_enforced"].moves == 0
    _, permissive = _sweep(env, "permissive", "--no-chains",
                           *[a for k, v in PERMISSIVE.items() for a in ("--switch", f"{k}={v}")],
                           *_args(both.affected))
    assert _counts(permissive)[0] == supported + both.moves
    assert {r.architecture for r in permissive.results if r.check == "forward" and r.status == "pass"} == {DENSE, MOE}

    # compat whatif reads the stored run and answers from what it measured, and names what it did not.
    res = runner.invoke(app, ["whatif", "--json", str(env / "base.json"), "--switch", "integer_sort_topk=runs",
                              "--switch", "grouped_mm_preconditions=not_enforced"])
    assert res.exit_code == 2 and "not measured" in res.output, res.output
    res = runner.invoke(app, ["whatif", "--json", str(env / "base.json"),
                              *[a for k, v in PERMISSIVE.items() for a in ("--switch", f"{k}={v}")]])
    assert res.exit_code == 0 and f"now supported: {MOE}" in res.output, res.output
