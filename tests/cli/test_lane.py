"""The newest-Transformers lane (issue 34 item 5) with a fake newer release: the registry gains an architecture and
transformers reports a newer version. The lane's run lists "new in transformers X: ..." and judges the new
architecture that night; it is its own identity (lane, versions) with its own baseline, never the pinned lane's
headline or baseline.

Cheap: the runner is the stand-in (``fake_runner``, in process), the registry a three-class stand-in.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import transformers
from fake_runner import write_plan
from sqlalchemy import select
from typer.testing import CliRunner

from cli.app import app
from compat.results import TRANSFORMERS_LATEST_LANE
from compat.settings import get_settings
from service import db, queries
from service.models import Run
from service.store import Store
from worker.catalog import catalog
from worker.orchestration.celery_app import NIGHTLY_TASK, beat_schedule
from worker.orchestration.tasks import nightly_sweep_task
from worker.run.process import devices

runner = CliRunner()
PINNED = {"llama": "LlamaForCausalLM", "mixtral": "MixtralForCausalLM"}
NEW = "NewArchForCausalLM"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k, v in {"COMPAT_DATABASE_URL": f"sqlite:///{tmp_path / 'compat.db'}", "COMPAT_VAR_DIR": str(tmp_path),
                 "COMPAT_RUN_HOOK": "fake_runner:run", "FAKE_RUNNER_PLAN": str(tmp_path / "plan.json"),
                 "COLUMNS": "200"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("COMPAT_LANE", raising=False)
    write_plan(tmp_path / "plan.json", tmp_path / "markers", {NEW: {"forward": ["unsupported_op", "aten::foo (Int)"]}})
    monkeypatch.setattr(catalog, "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", dict(PINNED))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _sweep(*extra: str) -> str:
    res = runner.invoke(app, ["sweep", "--device", "cpu", "--jobs", "0", "--source", "registry", *extra])
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


def _runs() -> list[Run]:
    with db.session_scope(get_settings().database_url) as s:
        rows = list(s.scalars(select(Run).order_by(Run.started)))
        s.expunge_all()
        return rows


def _newer_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `pip install -U transformers` over the pin would change, as far as the harness can see."""
    monkeypatch.setattr(catalog, "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", {**PINNED, "newarch": NEW})
    # The version the harness records is read from the transformers module ``devices`` holds; under pytest-xdist an
    # earlier test in the same worker can leave that a different module object than this file's ``transformers``
    # (seen: the lane run recorded 5.23.0), so patch every object the name may resolve to.
    for mod in {id(m): m for m in (transformers, devices.transformers, sys.modules["transformers"])}.values():
        monkeypatch.setattr(mod, "__version__", "99.0.0")
    monkeypatch.setenv("COMPAT_LANE", TRANSFORMERS_LATEST_LANE)
    get_settings.cache_clear()


def test_the_lane_lists_and_judges_what_is_new_with_its_own_baseline(env: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pinned_version = devices.transformers.__version__
    out = _sweep()
    assert "new in transformers" not in out  # the pinned lane, nothing new: nothing said
    _newer_release(monkeypatch)
    out = _sweep("--baseline", "last")
    assert f"new in transformers 99.0.0: {NEW} (since {pinned_version})" in out
    # Its own baseline: the lane's first night has none, though a pinned run exists.
    assert "vs baseline (none)" in out
    pinned, lane = _runs()
    assert (pinned.lane, lane.lane) == ("pinned", TRANSFORMERS_LATEST_LANE)
    assert lane.versions["transformers"] == "99.0.0" and pinned.versions["transformers"] == pinned_version

    # Judged the same night: the new architecture has its verdict in the lane's run.
    (new,) = [r for r in Store().run_results(lane.id) if r.architecture == NEW and r.check == "forward"]
    assert (new.status, new.blocking_op) == ("unsupported_op", "aten::foo (Int)")

    # The next night of the lane compares with the lane's last run; the headline stays the pinned lane's.
    out = _sweep("--baseline", "last", "--fail-on-regression")
    assert f"vs baseline {lane.id}" in out and "0 regression(s)" in out
    with db.session_scope(get_settings().database_url) as s:
        assert queries.get_run(s, lane.id).new_architectures == [NEW]
        assert [c.run_id for c in queries.coverage(s, device="cpu").items] == [pinned.id]


def test_the_beat_sends_the_lane_only_when_asked_and_to_its_own_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    assert list(beat_schedule("0 2 * * *", "compat")) == ["nightly-sweep"]  # off by default
    lane = beat_schedule("0 2 * * *", "compat", "0 4 * * *")[f"nightly-sweep-{TRANSFORMERS_LATEST_LANE}"]
    assert (lane["task"], lane["kwargs"], lane["options"]) == \
        (NIGHTLY_TASK, {"lane": TRANSFORMERS_LATEST_LANE}, {"queue": "compat-transformers-latest"})
    # A pinned worker that somehow gets the lane's nightly refuses it before planning anything.
    monkeypatch.delenv("COMPAT_LANE", raising=False)
    get_settings.cache_clear()
    with pytest.raises(ValueError, match="COMPAT_LANE=transformers-latest"):
        nightly_sweep_task.run(lane=TRANSFORMERS_LATEST_LANE)
    get_settings.cache_clear()
