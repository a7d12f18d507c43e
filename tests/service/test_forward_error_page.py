"""The architecture page and API item carry a forward's two errors (issue 30 item 2): the judged one (against the CPU
at the device's modelled precision) and the one against plain fp32, in compat.forward_error's one spelling, with the
line that says why the judged error is 0 on the simulated device; records stored before show the judged one only."""

from __future__ import annotations

from service_seed import ARCHS, make_run, rec

from compat import forward_error
from compat.results import Check, ResultRecord, Status
from service.store import Store

JUDGED = {"max_abs_err": 0.0, "cosine": 1.0, "policy": "bf16_matmul"}


def _store(sqlite_url: str, forward: ResultRecord) -> None:
    store = Store(sqlite_url)
    run = make_run("neuron")
    store.start_run(run, ARCHS[:1], [("LlamaForCausalLM", "neuron", str(c)) for c in (Check.LOAD, Check.FORWARD)])
    store.add_results(run.id, [rec("LlamaForCausalLM", Check.LOAD), forward])
    store.finish_run(run.id)


def test_the_page_shows_both_errors_and_why_the_judged_one_is_zero(sqlite_url: str, client) -> None:  # noqa: ANN001
    _store(sqlite_url, rec("LlamaForCausalLM", Check.FORWARD, metrics=JUDGED, fp32_max_abs_err=0.0031,
                           fp32_cosine=0.99999213))
    item = client.get("/api/v1/architectures/LlamaForCausalLM").json()
    forward = next(r for r in item["latest"] if r["check"] == "forward")
    assert (forward["fp32_max_abs_err"], forward["fp32_cosine"]) == (0.0031, 0.99999213)
    html = client.get("/architectures/LlamaForCausalLM").text
    assert ("<span data-forward-errors>judged max abs err 0, cosine 1.000000; fp32 max abs err 0.0031, cosine "
            "0.999992</span>") in html
    assert forward_error.WHY_JUDGED_IS_ZERO.replace("'", "&#39;") in html


def test_a_record_stored_before_shows_the_judged_error_alone(sqlite_url: str, client) -> None:  # noqa: ANN001
    _store(sqlite_url, rec("LlamaForCausalLM", Check.FORWARD, metrics=JUDGED))
    html = client.get("/architectures/LlamaForCausalLM").text
    assert "<span data-forward-errors>judged max abs err 0, cosine 1.000000</span>" in html
    assert "data-forward-note" not in html and "fp32 max abs err" not in html


def test_the_why_line_only_where_a_reduced_policy_was_judged() -> None:
    base = dict(architecture="A", device="cpu", check=Check.FORWARD, status=Status.PASS, fp32_max_abs_err=0.0,
                fp32_cosine=1.0)
    fp32 = ResultRecord(**base, metrics={**JUDGED, "policy": "fp32"})
    assert forward_error.why_note([fp32]) is None  # on an fp32 policy the judged reference is plain fp32
    assert forward_error.why_note([fp32, ResultRecord(**base, metrics=JUDGED)]) == forward_error.WHY_JUDGED_IS_ZERO
    load = ResultRecord(architecture="A", device="cpu", check=Check.LOAD, status=Status.PASS, metrics={"tensors": 3})
    assert forward_error.error_text(load) is None  # no comparison of outputs, no figures
