"""Export and history (issue 34 item 6): a run's results as CSV (header row, one row per result, record fields,
formula-like cells defused; 404 for an unknown run), and "what regressed in the last N days" on the API and its page,
each run against its own baseline (a newest-Transformers lane run never against the pinned lane)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

from service_seed import ARCHS, CHECKS, make_run, rec, seed

from compat.results import TRANSFORMERS_LATEST_LANE, ErrorInfo, Status
from compat.results_csv import COLUMNS
from service.store import Store


def test_results_csv_has_a_header_and_one_row_per_result(client, sqlite_url) -> None:
    store = Store(sqlite_url)
    run_id = seed(store, failing={"MixtralForCausalLM": Status.UNSUPPORTED_OP})
    resp = client.get(f"/api/v1/runs/{run_id}/results.csv")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(resp.text)))
    assert rows[0] == COLUMNS and "log" not in COLUMNS and {"status", "blocking_op", "error_message"} <= set(COLUMNS)
    body = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert len(body) == len(ARCHS) * len(CHECKS)
    assert {r["run_id"] for r in body} == {run_id}
    (bad,) = [r for r in body if r["status"] != "pass"]
    assert (bad["architecture"], bad["check"], bad["status"], bad["blocking_op"], bad["error_type"]) == \
        ("MixtralForCausalLM", "forward", "unsupported_op", "aten::histc (Long)", "RuntimeError")


def test_results_csv_defuses_formulas_and_404s(client, sqlite_url) -> None:
    store = Store(sqlite_url)
    run = make_run()
    store.start_run(run, ARCHS[:1], [])
    store.add_results(run.id, [rec("LlamaForCausalLM", CHECKS[0], Status.ERROR,
                                   error=ErrorInfo(type="X", message='=HYPERLINK("http://evil")'))])
    store.finish_run(run.id)
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/v1/runs/{run.id}/results.csv").text)))
    assert rows[0]["error_message"] == '\'=HYPERLINK("http://evil")'
    assert client.get("/api/v1/runs/nope/results.csv").status_code == 404
    page = client.get(f"/runs/{run.id}").text
    assert f'href="/api/v1/runs/{run.id}/results.csv"' in page


def test_regressed_in_the_last_n_days(client, sqlite_url) -> None:
    store = Store(sqlite_url)
    now = datetime.now(UTC)
    seed(store, started=now - timedelta(days=10))
    mixtral = seed(store, failing={"MixtralForCausalLM": Status.UNSUPPORTED_OP}, started=now - timedelta(days=9))
    qwen = seed(store, failing={"Qwen2ForCausalLM": Status.ERROR}, started=now - timedelta(days=2))
    # A newest-Transformers lane run (its first): no baseline in its lane, so no regression, though Llama fails.
    lane = make_run(started=now - timedelta(hours=1)).model_copy(update={"lane": TRANSFORMERS_LATEST_LANE})
    store.start_run(lane, ARCHS, [])
    store.add_results(lane.id, [rec(a.name, c, Status.ERROR if a.name == "LlamaForCausalLM" else Status.PASS)
                                for a in ARCHS for c in CHECKS])
    store.finish_run(lane.id)

    week = client.get("/api/v1/regressions", params={"days": 7}).json()
    assert [(e["architecture"], e["check"], e["run_id"]) for e in week["events"]] == \
        [("Qwen2ForCausalLM", "forward", qwen)]
    assert week["runs_examined"] == 2  # the pinned run 2 days ago and the lane's run
    month = client.get("/api/v1/regressions", params={"days": 30}).json()
    assert [(a["architecture"], a["regressions"], a["last_run"]) for a in month["architectures"]] == \
        [("Qwen2ForCausalLM", 1, qwen), ("MixtralForCausalLM", 1, mixtral)]
    assert client.get("/api/v1/regressions", params={"days": 1}).json()["events"] == []
    assert client.get("/api/v1/regressions", params={"days": 0}).status_code == 422

    page = client.get("/regressions", params={"days": 30}).text
    assert 'data-arch="MixtralForCausalLM"' in page and 'data-arch="Qwen2ForCausalLM"' in page
    assert 'data-arch="LlamaForCausalLM"' not in page
    assert "Nothing regressed" in client.get("/regressions", params={"days": 1}).text
