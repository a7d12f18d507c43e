"""Issue 19's acceptance: one store filled with a sweep and a submission; the overview, the architecture page, the
matrix, `compat show`, `compat runs list` and the API agree on each architecture's verdict, its native/fallback ops
per check and the kind of each run in its history. The sweep and the submission run through the real code
(`compat sweep`, `service.submissions.create_submission`, `run_submission`) with the stand-in runner's verdicts."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from fake_runner import write_plan
from fastapi.testclient import TestClient
from test_one_truth import A, B, C, D, E, _cli, store_env  # noqa: F401 - store_env is the fixture used below

from cli.serve import create_app
from compat.settings import get_settings
from service import db
from service.submissions import SubmissionInput, create_submission
from worker.orchestration.submissions import run_submission

ARGMAX, ISIN, HISTC = "aten::argmax", "aten::isin", "aten::histc (Long)"
# A native; D supported with ops on the CPU in two checks; E blocked at histc; B a forward mismatch; C no verdict.
SWEEP = {D: {"forward": ["pass", None, [ISIN]], "generate": ["pass", None, [ARGMAX]]},
         E: {"forward": ["unsupported_op", HISTC]},
         B: {"forward": ["mismatch", None]},
         C: {"load": ["harness_error", None]}}
# The submitted config of A (LlamaForCausalLM) fails where the catalog's passes: it must not change A's verdict.
SUBMITTED = {A: {"forward": ["unsupported_op", HISTC]}}
LLAMA = {"model_type": "llama", "architectures": [A], "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}


def _submit(tmp: Path) -> int:
    write_plan(tmp / "plan.json", tmp / "markers", SUBMITTED)
    settings = get_settings()
    with db.session_scope(settings.database_url) as session:
        sub = create_submission(session, SubmissionInput(config=json.dumps(LLAMA).encode()), submitter="tester",
                                settings=settings)
        sub_id = sub.id
    # "done": the run judged the device (a failing check is a verdict); "failed" is for runs that judged nothing.
    assert run_submission(sub_id, settings.database_url, jobs=0) == "done"
    return sub_id


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def test_every_surface_tells_the_same_story_per_architecture(store_env: Path) -> None:  # noqa: F811
    write_plan(store_env / "plan.json", store_env / "markers", SWEEP)
    _cli("sweep", "--device", "cpu", "--jobs", "0", "--trigger", "nightly")
    sub_id = _submit(store_env)

    with TestClient(create_app(get_settings())) as client:
        items = {r["name"]: r for r in client.get("/api/v1/architectures",
                                                  params={"device": "cpu", "per_page": 500}).json()["items"]}
        details = {n: client.get(f"/api/v1/architectures/{n}").json() for n in items}
        pages = {n: client.get(f"/architectures/{n}").text for n in items}
        matrix = client.get("/matrix", params={"device": "cpu"}).text
        cov = client.get("/api/v1/coverage", params={"device": "cpu"}).json()["items"][0]
        overview = client.get("/").text
        runs = client.get("/api/v1/runs").json()
        subs = client.get("/api/v1/runs", params={"kind": "submission"}).json()
    assert set(items) == {A, B, C, D, E}

    expected = {A: "supported natively", B: "failing", C: "not judged", D: "supported with CPU fallback",
                E: "failing: forward unsupported_op at aten::histc (Long)"}
    for name, detail in details.items():
        verdict = detail["verdicts"]["cpu"]
        assert verdict.startswith(expected[name]), (name, verdict)
        # The architecture page and `compat show` open with the same line.
        line = re.search(r"<p class=\"small\" data-verdict>(.*?)</p>", pages[name], re.S)
        if verdict == "supported natively":  # the pill says it whole; no second line repeats it (issue 30 item 6)
            assert line is None and "supported natively</span>" in pages[name]
        else:
            assert _text(line.group(1)) == verdict
        shown = _cli("show", name, "--device", "cpu").splitlines()
        assert " ".join(shown[0].split()) == verdict or verdict in " ".join(" ".join(shown[:2]).split()), shown[:3]
        # Native/fallback ops per check: API item = detail = matrix cells.
        ops = {r["check"]: r["fallback_ops"] for r in detail["latest"] if r["fallback_ops"]}
        assert {c: o for c, o in items[name]["fallback_ops"].items() if o} == ops
        for check in ("load", "forward", "generate"):
            cell = re.search(rf'<tr[^>]*>(?:(?!</tr>).)*?href="/architectures/{name}"(?:(?!</tr>).)*?'
                             rf'data-col="cpu:{check}">(.*?)</td>', matrix, re.S)
            assert cell is not None, (name, check)
            if detail["latest"] and any(r["check"] == check and r["status"] == "pass" for r in detail["latest"]):
                ran = "cpu-fallback" if check in ops else "native"
                assert f'data-ran="{ran}"' in cell.group(1), (name, check, cell.group(1))
                for op in ops.get(check, []):
                    assert op.split("::")[-1] in _text(cell.group(1)) + html.unescape(cell.group(1))
        # History kinds: the sweep in `history`, the submission only in `submitted` (and only for A).
        assert {h["kind"] for h in detail["history"]} == {"sweep"}
        assert [h["submission_id"] for h in detail["submitted"]] == ([sub_id] if name == A else [])

    assert details[D]["verdicts"]["cpu"] == "supported with CPU fallback: forward aten::isin; generate aten::argmax"
    # A's submitted config failed; A stays supported natively everywhere, and its page lists the submission apart.
    assert details[A]["supported"] == {"cpu": True}
    assert details[A]["submitted"][0]["statuses"]["forward"] == "unsupported_op"
    assert pages[A].count('data-kind="submission"') == 1

    # The overview's counts are the per-architecture verdicts counted.
    words = [d["verdicts"]["cpu"] for d in details.values()]
    native = sum(w == "supported natively" for w in words)
    fallback = sum(w.startswith("supported with CPU fallback") for w in words)
    assert (cov["supported"], cov["native"], cov["supported_with_fallback"]) == (native + fallback, native, fallback)
    report = re.search(r'data-metric="out-of-box">(\d+) / (\d+) .*?data-metric="native">(\d+) / ', overview, re.S)
    assert (int(report.group(1)), int(report.group(3))) == (native + fallback, native)

    # Runs: the submission is its own kind, labelled as one, on the API and in `compat runs list`.
    assert runs["kinds"] == {"sweep": 1, "submission": 1}
    sub_run = subs["items"][0]
    assert sub_run["submission_id"] == sub_id and sub_run["scope"] == "submission"
    assert sub_run["scope_label"].startswith(f"submission #{sub_id}")
    listed = _cli("runs", "list", "--kind", "submission")
    assert sub_run["id"] in listed and f"#{sub_id}" in listed
    assert sub_run["id"] not in _cli("runs", "list")
