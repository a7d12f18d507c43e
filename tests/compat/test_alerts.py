"""What a notification says (compat.alerts): nothing without a confirmed regression; the Slack text names the
architecture, the op and the diff page; signatures group by status and normalised detail; the issue lifecycle's
decisions (open, comment on a repeat, close when every key passes, keep open when a key was not measured)."""

from __future__ import annotations

from compat import alerts
from compat.diff import Change, RunDiff

ID = {"device": "neuron", "lane": "pinned", "versions": {"transformers": "5.23.0"}}


def _reg(arch: str, check: str, after: str = "unsupported_op", detail: str = "aten::sort (Int)") -> Change:
    return Change(arch, "neuron", check, "pass", after, detail)


def _diff(*regs: Change) -> RunDiff:
    return RunDiff(baseline_run="base0001", current_run="run0002", regressions=list(regs))


def test_no_confirmed_regression_sends_nothing() -> None:
    assert alerts.payload(_diff(), identity=ID) is None
    # The flake guard's seam: regressions it did not confirm are not sent.
    assert alerts.payload(_diff(_reg("MixtralForCausalLM", "forward")), identity=ID, confirmed=[]) is None


def test_payload_text_names_architecture_op_and_diff_page() -> None:
    diff = _diff(*(_reg("MixtralForCausalLM", c) for c in ("forward", "generate", "train")))
    body = alerts.payload(diff, identity=ID, public_url="https://compat.example/")
    assert body is not None
    url = "https://compat.example/runs/diff?a=base0001&b=run0002"
    assert body["url"] == url
    assert body["text"].splitlines()[1] == \
        "• MixtralForCausalLM forward, generate, train: pass -> unsupported_op (aten::sort (Int))"
    assert f"<{url}|run diff>" in body["text"]
    assert body["regressed_architectures"] == ["MixtralForCausalLM"]
    assert len(body["confirmed_regressions"]) == 3 and body["diff"]["current_run"] == "run0002"
    assert [(s["status"], s["what"], s["count"]) for s in body["signatures"]] == \
        [("unsupported_op", "aten::sort (Int)", 3)]


def test_no_public_url_no_link() -> None:
    body = alerts.payload(_diff(_reg("A", "forward")), identity=ID)
    assert body is not None and body["url"] is None and "run diff" not in body["text"]


def test_signatures_group_by_status_and_normalised_detail() -> None:
    sigs = alerts.signatures_of([
        _reg("A", "forward", "error", "RuntimeError: size 128 at 0x7f3a"),
        _reg("B", "forward", "error", "RuntimeError: size 256 at 0x11ff"),
        _reg("C", "forward", "unsupported_op", "aten::_grouped_mm (BFloat16)"),
    ])
    assert [(s.status, s.what, s.architectures) for s in sigs] == [
        ("error", "RuntimeError: size N at <hex>", ["A", "B"]),
        ("unsupported_op", "aten::_grouped_mm (BFloat16)", ["C"]),  # a dtype's width is not a varying number
    ]
    assert sigs[0].key != sigs[1].key and len(sigs[0].key) == 16


def test_issue_lifecycle_decisions() -> None:
    diff = _diff(_reg("MixtralForCausalLM", "forward"))
    (first,) = alerts.issue_actions(diff, [], {})
    assert first.kind == "open" and "MixtralForCausalLM" in first.title and "aten::sort (Int)" in first.title
    assert alerts.marker_of(first.body) == first.signature
    assert alerts.keys_of(first.body) == {("MixtralForCausalLM", "neuron", "forward")}

    # A repeat (another check, same signature) comments and widens the keys the fix waits for.
    issue = {"number": 7, "body": first.body}
    (again,) = alerts.issue_actions(_diff(_reg("MixtralForCausalLM", "train")), [issue], {})
    assert (again.kind, again.number) == ("comment", 7)
    assert alerts.keys_of(again.new_body) == {("MixtralForCausalLM", "neuron", "forward"),
                                              ("MixtralForCausalLM", "neuron", "train")}

    # Fixed only when every key passes; a key the run did not measure keeps it open.
    issue = {"number": 7, "body": again.new_body}
    fixed = RunDiff(baseline_run="run0002", current_run="run0003")
    half = {("MixtralForCausalLM", "neuron", "forward"): "pass"}
    assert alerts.issue_actions(fixed, [issue], half) == []
    both = half | {("MixtralForCausalLM", "neuron", "train"): "pass"}
    (close,) = alerts.issue_actions(fixed, [issue], both)
    assert (close.kind, close.number) == ("close", 7) and "run0003" in close.body
    # Not ours (no marker): never touched.
    assert alerts.issue_actions(fixed, [{"number": 1, "body": "a human's issue"}], both) == []
