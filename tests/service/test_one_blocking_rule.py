"""One rule for what blocks an architecture (compat.blocking, issue 31 item 4): the list and matrix rows, the detail
page and API item, `compat show`, the verdict line and the blockers' chains all name the same op, from records
stored in an order where each of the three old rules (first record with any op; first failure in record order; first
op in check order whatever the status) would have named another."""

from __future__ import annotations

import re

import pytest
from service_seed import ARCHS, make_run
from typer.testing import CliRunner

from cli.app import app
from cli.console import console
from compat.blocking import blocking_op, blocking_record
from compat.results import Check, ErrorInfo, ResultRecord, Status
from compat.settings import get_settings
from compat.verdict_text import verdict_text
from service.store import Store

ARCH = "MixtralForCausalLM"
FORWARD, GENERATE, TRAIN, LORA = ("aten::sort (Int)", "aten::_grouped_mm (Float, Int)", "aten::histc (Long)",
                                  "aten::cumsum (Long)")


def records() -> list[ResultRecord]:
    rank = next(a.rank for a in ARCHS if a.name == ARCH)

    def r(check: Check, status: Status, op: str | None = None) -> ResultRecord:
        err = ErrorInfo(type="RuntimeError", message=f"{check} failed") if status != Status.PASS else None
        return ResultRecord(architecture=ARCH, rank=rank, device="neuron", check=check, status=status,
                            blocking_op=op, error=err)

    # Stored out of check order: a reference_fail naming an op first, then train, generate, and forward last.
    return [r(Check.LORA, Status.REFERENCE_FAIL, LORA), r(Check.TRAIN, Status.ERROR, TRAIN),
            r(Check.GENERATE, Status.UNSUPPORTED_OP, GENERATE), r(Check.LOAD, Status.PASS),
            r(Check.FORWARD, Status.UNSUPPORTED_OP, FORWARD)]


def test_every_surface_names_the_same_blocking_op(sqlite_url: str, client, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    recs = records()
    assert blocking_record(recs).check == Check.FORWARD and blocking_op(recs) == FORWARD
    store = Store(sqlite_url)
    run = make_run("neuron")
    store.start_run(run, ARCHS, [(ARCH, "neuron", str(r.check)) for r in recs])
    store.add_results(run.id, recs)
    store.finish_run(run.id)

    row = next(i for i in client.get("/api/v1/architectures", params={"device": "neuron"}).json()["items"]
               if i["name"] == ARCH)
    item = client.get(f"/api/v1/architectures/{ARCH}").json()
    chains = client.get("/api/v1/blockers", params={"run_id": run.id}).json()["chains"]
    matrix = client.get("/matrix").text
    page = client.get(f"/architectures/{ARCH}").text
    monkeypatch.setenv("COMPAT_DATABASE_URL", sqlite_url)
    monkeypatch.setattr(console, "width", 200)
    get_settings.cache_clear()
    try:
        shown = CliRunner().invoke(app, ["show", ARCH, "--device", "neuron"])
    finally:
        get_settings.cache_clear()
    assert shown.exit_code == 0, shown.output

    assert row["blocking_op"] == item["blocking_op"] == FORWARD
    assert item["error"] == "RuntimeError: forward failed"  # the blocking record's error, not train's
    assert [c["links"][0]["op"] for c in chains if c["architecture"] == ARCH] == [FORWARD]
    assert verdict_text(recs) == f"failing: forward unsupported_op at {FORWARD}"
    assert item["verdicts"]["neuron"] == verdict_text(recs)
    assert f"{ARCH}: failing: forward unsupported_op at {FORWARD}" in " ".join(shown.output.split())
    # The pages print the op the API gives: the detail page's "blocking op" (its table still lists each check's own
    # op), and the matrix row's failing cells, which name no other op.
    assert re.findall(r"<code data-blocking-op>([^<]+)</code>", page) == [FORWARD]
    assert set(re.findall(r"aten::\w+ \([\w, ]+\)", matrix)) == {FORWARD}
