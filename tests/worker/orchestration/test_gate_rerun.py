"""``nightly.regression_gate`` with the flake guard handed in: called once per run with regressions; a re-run that
passes makes them flaky (gate passes), one that fails confirms them, one that cannot run confirms nothing (every
regression counts and the gate says why)."""

from __future__ import annotations

from compat.results import Check, ResultRecord, Status
from worker.orchestration.nightly import regression_gate


def _recs(status: Status) -> list[ResultRecord]:
    return [ResultRecord(architecture="A", device="cpu", check=Check.FORWARD, status=status)]


class Runs:
    """The gate's store (nightly.RunStore), in memory: run "b" regressed against "a"."""

    def __init__(self) -> None:
        self.results = {"a": _recs(Status.PASS), "b": _recs(Status.MISMATCH)}
        self.reruns: dict[str, str] = {}

    def baseline_run_id(self, run_id: str, trigger: str | None = None) -> str | None:
        return "a" if run_id == "b" else None

    def run_results(self, run_id: str) -> list[ResultRecord]:
        return self.results[run_id]

    def run_state(self, run_id: str) -> tuple[str, int, int]:
        return "complete", 1, 0

    def selection(self, run_id: str) -> list[str] | None:
        return None

    def determinants(self, run_id: str | None) -> dict[str, str] | None:
        return {"transformers": "5.23.0" if run_id == "a" else "5.24.0"}

    def rerun_id(self, run_id: str) -> str | None:
        return self.reruns.get(run_id)


def _rerun_with(store: Runs, status: Status, calls: list[str]):  # noqa: ANN202
    def rerun(diff) -> str:  # noqa: ANN001
        calls.append(diff.current_run)
        store.results["c"] = _recs(status)
        store.reruns[diff.current_run] = "c"
        return "c"
    return rerun


def test_a_rerun_that_passes_makes_the_regression_flaky_and_runs_once() -> None:
    store, calls = Runs(), []
    verdict = regression_gate(store, "b", "cpu", "last", True, _rerun_with(store, Status.PASS, calls))
    assert verdict.code == 0 and calls == ["b"]
    assert "moved      transformers 5.23.0 -> 5.24.0" in verdict.lines[0]
    assert "flaky      A [cpu] forward: pass -> mismatch  [re-run: pass]" in verdict.lines[0]
    regression_gate(store, "b", "cpu", "last", True, _rerun_with(store, Status.PASS, calls))
    assert calls == ["b"]  # a run is re-run once


def test_a_rerun_that_fails_confirms_and_one_that_cannot_run_confirms_nothing() -> None:
    store = Runs()
    assert regression_gate(store, "b", "cpu", "last", True, _rerun_with(store, Status.MISMATCH, [])).code == 1

    def broken(diff) -> str:  # noqa: ANN001
        raise RuntimeError("no worker could start")

    verdict = regression_gate(Runs(), "b", "cpu", "last", True, broken)
    assert verdict.code == 1
    assert verdict.lines[0] == ("flake guard: the re-run failed (RuntimeError: no worker could start); every "
                                "regression counts")
