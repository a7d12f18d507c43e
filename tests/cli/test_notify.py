"""Notifications against servers started here on 127.0.0.1 (never a real webhook or GitHub): the issue's
acceptance shape at the CLI (a regression POSTs once, a repeat of the run does not), a down, failing or slow
endpoint that neither fails the run nor goes unrecorded, tokens and the webhook's path never logged, and the GitHub
issue lifecycle (open, comment on a repeat, close on a fix).

Cheap: the runner is the stand-in (``fake_runner``), in process (``--jobs 0``), on the cpu device.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fake_runner import write_plan
from local_servers import Capture, CaptureHandler, FakeGitHub, GitHubHandler, closed_port_url, serving
from sqlalchemy import select
from typer.testing import CliRunner

from cli.app import app
from compat.diff import Change, RunDiff
from compat.results import ArchitectureEntry, DeviceInfo, ResultRecord, RunInfo, Status
from compat.settings import get_settings
from service.models import Run
from service.store import Store
from worker.orchestration import notify

runner = CliRunner()
ARCH = "MixtralForCausalLM"
SORT = ["unsupported_op", "aten::sort (Int)"]
TOKEN = "ghp_" + "s3cr3t" * 6
HOOK_SECRET = "T000/B000/XXXXSECRETXXXX"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k in ("COMPAT_NOTIFY_WEBHOOK", "COMPAT_GITHUB_REPO", "COMPAT_GITHUB_TOKEN", "COMPAT_PUBLIC_URL"):
        monkeypatch.delenv(k, raising=False)
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_RUN_HOOK": "fake_runner:run", "FAKE_RUNNER_PLAN": str(tmp_path / "plan.json"),
                 "COMPAT_NOTIFY_TIMEOUT_S": "2", "COMPAT_NOTIFY_RETRIES": "1", "COLUMNS": "200"}.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _configure(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for k, v in values.items():
        monkeypatch.setenv(f"COMPAT_{k.upper()}", v)
    get_settings.cache_clear()


def _sweep(tmp: Path, mixtral: dict, *extra: str) -> tuple[int, str]:
    write_plan(tmp / "plan.json", tmp / "markers", {ARCH: mixtral})
    res = runner.invoke(app, ["sweep", "--device", "cpu", "--jobs", "0", "--source", "registry", "--arch", ARCH,
                              *extra])
    return res.exit_code, res.output


GATE = ("--baseline", "last", "--fail-on-regression")
BROKEN = {"forward": SORT, "generate": SORT, "train": SORT}


def test_a_regression_posts_once_and_a_repeat_run_does_not(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = Capture()
    with serving(CaptureHandler, capture) as base:
        _configure(monkeypatch, notify_webhook=f"{base}/hook/{HOOK_SECRET}", public_url="http://compat.example")
        assert _sweep(env, {})[0] == 0  # no baseline: nothing to say
        code, out = _sweep(env, BROKEN, *GATE)
        assert code == 1, out
        assert "notifications: webhook sent" in out
        assert len(capture.requests) == 1
        body = capture.requests[0]["json"]
        assert ARCH in body["text"] and "aten::sort" in body["text"]
        assert body["url"].startswith("http://compat.example/runs/diff?a=")
        run_id = body["run"]
        assert Store().notifications(run_id)["webhook"]["state"] == "sent"

        code, out = _sweep(env, BROKEN, *GATE)  # the same failures: no regression against the last run
        assert code == 0, out
        assert len(capture.requests) == 1


def test_a_flaky_regression_sends_nothing(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failing once, passing on the flake guard's re-run in a fresh process: flaky, not confirmed, no POST."""
    capture = Capture()
    with serving(CaptureHandler, capture) as base:
        _configure(monkeypatch, notify_webhook=f"{base}/hook/{HOOK_SECRET}")
        assert _sweep(env, {})[0] == 0
        write_plan(env / "plan.json", env / "markers-2", {ARCH: {"once": BROKEN}})  # fails on its first run only
        res = runner.invoke(app, ["sweep", "--device", "cpu", "--jobs", "0", "--source", "registry", "--arch", ARCH,
                                  *GATE])
        assert res.exit_code == 0, res.output
        assert "notifications: webhook nothing_to_send" in res.output
    assert capture.requests == []


@pytest.mark.parametrize("endpoint", ["down", "slow"])
def test_a_bad_endpoint_never_fails_the_run_and_is_recorded(env: Path, monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture, endpoint: str) -> None:
    capture = Capture(delay_s=4.0 if endpoint == "slow" else 0.0)  # slow: past COMPAT_NOTIFY_TIMEOUT_S=2
    with serving(CaptureHandler, capture) as base:
        url = closed_port_url() if endpoint == "down" else f"{base}/hook/{HOOK_SECRET}"
        _configure(monkeypatch, notify_webhook=url + ("" if endpoint != "down" else f"/{HOOK_SECRET}"))
        assert _sweep(env, {})[0] == 0
        with caplog.at_level(logging.INFO, logger="worker.orchestration.notify"):
            code, out = _sweep(env, BROKEN, "--baseline", "last")  # no gate: the run itself must succeed
        assert code == 0, out
        assert "notifications: webhook failed" in out
    (state,) = [Store().notifications(r) for r in _run_ids() if Store().notifications(r)]
    # One try and the one retry COMPAT_NOTIFY_RETRIES allows: bounded, whatever the endpoint does.
    assert state["webhook"]["state"] == "failed" and state["webhook"]["attempts"] == 2
    if endpoint != "down":
        assert len(capture.requests) == 2
    assert HOOK_SECRET not in caplog.text and HOOK_SECRET not in out


def _run_ids() -> list[str]:
    with Store().session() as s:
        return list(s.scalars(select(Run.id)))


def test_a_failing_endpoint_is_retried_within_bounds(env: Path) -> None:
    capture = Capture(status=503)
    with serving(CaptureHandler, capture) as base:
        state = notify.send_webhook(f"{base}/hook", {"text": "x"}, get_settings())
    assert state == {"state": "failed", "attempts": 2, "error": "HTTP 503"} and len(capture.requests) == 2
    capture = Capture(status=404)  # a client error is not retried
    with serving(CaptureHandler, capture) as base:
        state = notify.send_webhook(f"{base}/hook", {"text": "x"}, get_settings())
    assert state["attempts"] == 1 and len(capture.requests) == 1


# -- GitHub issues ------------------------------------------------------------------------------------------------

class MemoryStore:
    """The four store calls ``notify.deliver`` makes, over one run's records."""

    def __init__(self, records: list[ResultRecord]) -> None:
        self.records, self.state = records, None

    def claim_notifications(self, run_id: str) -> bool:
        if self.state is not None:
            return False
        self.state = {"state": "pending"}
        return True

    def set_notifications(self, run_id: str, state: dict) -> None:
        self.state = state

    def run_identity(self, run_id: str) -> dict:
        return {"device": "neuron", "lane": "pinned", "versions": {}}

    def run_results(self, run_id: str) -> list[ResultRecord]:
        return self.records


def _rec(check: str, status: str) -> ResultRecord:
    return ResultRecord(architecture=ARCH, device="neuron", check=check, status=Status(status))


def _diff(run: str, regressions: list[Change]) -> RunDiff:
    return RunDiff(baseline_run="base", current_run=run, regressions=regressions)


def test_github_issue_opened_commented_closed(env: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    gh = FakeGitHub("acme/bringup", TOKEN)
    human = gh.add("a human's issue", "no marker here", ["compat-regression"])
    with serving(GitHubHandler, gh) as base, caplog.at_level(logging.DEBUG):
        _configure(monkeypatch, github_repo="acme/bringup", github_token=TOKEN, github_api_url=base)
        fwd = Change(ARCH, "neuron", "forward", "pass", "unsupported_op", "aten::sort (Int)")
        rec = notify.deliver(MemoryStore([_rec("forward", "unsupported_op")]), _diff("r1", [fwd]))
        assert rec["github"]["state"] == "sent"
        (opened,) = [n for n in gh.issues if n != human]
        assert "aten::sort (Int)" in gh.issues[opened]["title"] and gh.issues[opened]["state"] == "open"

        # The same signature again (another check): a comment on the same issue, no new issue.
        train = Change(ARCH, "neuron", "train", "pass", "unsupported_op", "aten::sort (Int)")
        notify.deliver(MemoryStore([_rec("forward", "unsupported_op"), _rec("train", "unsupported_op")]),
                       _diff("r2", [train]))
        assert len(gh.issues) == 2 and len(gh.comments[opened]) == 1 and "r2" in gh.comments[opened][0]

        # forward passes again, train still fails: stays open. Both pass: closed with a comment.
        notify.deliver(MemoryStore([_rec("forward", "pass"), _rec("train", "unsupported_op")]), _diff("r3", []))
        assert gh.issues[opened]["state"] == "open"
        rec = notify.deliver(MemoryStore([_rec("forward", "pass"), _rec("train", "pass")]), _diff("r4", []))
        assert [a["action"] for a in rec["github"]["actions"]] == ["close"]
        assert gh.issues[opened]["state"] == "closed" and "r4" in gh.comments[opened][-1]
        assert gh.issues[human]["state"] == "open" and gh.comments[human] == []
    assert gh.unauthorized == 0
    assert TOKEN not in caplog.text


def test_github_down_or_refusing_is_recorded_not_raised(env: Path, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    fwd = Change(ARCH, "neuron", "forward", "pass", "unsupported_op", "aten::sort (Int)")
    _configure(monkeypatch, github_repo="acme/bringup", github_token=TOKEN,
               github_api_url=closed_port_url().removesuffix("/hook"))
    with caplog.at_level(logging.DEBUG):
        rec = notify.deliver(MemoryStore([]), _diff("r1", [fwd]))
    assert rec["github"]["state"] == "failed"
    gh = FakeGitHub("acme/bringup", "another-token")
    with serving(GitHubHandler, gh) as base, caplog.at_level(logging.DEBUG):
        _configure(monkeypatch, github_api_url=base)
        rec = notify.deliver(MemoryStore([]), _diff("r1", [fwd]))
    assert rec["github"] == {"state": "failed", "error": "HTTP 401", "actions": []}  # the first call: nothing done
    assert gh.unauthorized == 1  # a 4xx is not retried
    assert TOKEN not in caplog.text


def test_off_unless_configured(env: Path) -> None:
    store = MemoryStore([])
    fwd = Change(ARCH, "neuron", "forward", "pass", "unsupported_op", "aten::sort (Int)")
    assert notify.deliver(store, _diff("r1", [fwd])) is None and store.state is None


def test_one_turn_per_run_in_the_store(env: Path) -> None:
    st = Store()
    run = RunInfo(device=DeviceInfo(name="cpu", simulated=False, description="cpu", torch_version="x"))
    st.start_run(run, [ArchitectureEntry(name=ARCH, model_type="mixtral", rank=1)], [])
    assert st.claim_notifications(run.id) is True
    assert st.claim_notifications(run.id) is False  # a racing finalizer, or the gate after it
    st.set_notifications(run.id, {"state": "done"})
    assert st.notifications(run.id) == {"state": "done"}
