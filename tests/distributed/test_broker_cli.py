"""The CLI on a cluster, as the nightly workflow and users run it: `compat sweep --broker` with the regression gate,
and the real run_architecture path giving the same results through Celery as in-process."""

from __future__ import annotations

import json
import subprocess

from dist_env import REPO, VENV_BIN

from compat.results import Report

ARCHS = ["GPT2LMHeadModel", "LlamaForCausalLM"]


def compat(cluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = cluster.env() | {"COLUMNS": "200", "COMPAT_CATALOG_SOURCE": "registry"}
    return subprocess.run([str(VENV_BIN / "compat"), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def arch_args() -> list[str]:
    return [a for name in ARCHS for a in ("--arch", name)] + ["--checks", "load,forward"]


def test_broker_sweep_gate_exits_nonzero_on_regression_and_prints_it(shared_redis, pg_url, make_cluster):
    cluster = make_cluster(shared_redis, pg_url)
    plan_file = cluster.tmp / "fake-plan.json"
    # Workers read the behaviour of each real catalog entry from this file.
    plan_file.write_text(json.dumps({"marker_dir": str(cluster.markers), "archs": {}}))
    cluster.env = (lambda base=cluster.env: lambda: base() | {"FAKEARCH_PLAN": str(plan_file)})()
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    cluster.wait_ready()
    gate = ["--trigger", "nightly", "--baseline", "last-nightly", "--fail-on-regression"]

    first = compat(cluster, "sweep", "--broker", *arch_args(), *gate, "--json", str(cluster.tmp / "n1.json"))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "0 regression(s)" in first.stdout and "baseline (none)" in first.stdout
    report = Report.model_validate_json((cluster.tmp / "n1.json").read_text())
    assert report.run.trigger == "nightly" and len(report.results) == 4
    assert {r.status for r in report.results} == {"pass"}

    plan_file.write_text(json.dumps({"marker_dir": str(cluster.markers),
                                     "archs": {"LlamaForCausalLM": {"status": "unsupported_op"}}}))
    second = compat(cluster, "sweep", "--broker", *arch_args(), *gate, "--json", str(cluster.tmp / "n2.json"))
    assert second.returncode == 1, second.stdout + second.stderr
    assert f"vs baseline {report.run.id}: 2 regression(s)" in second.stdout
    assert "REGRESSION LlamaForCausalLM [neuron] load: pass -> unsupported_op" in second.stdout
    assert "REGRESSION LlamaForCausalLM [neuron] forward: pass -> unsupported_op" in second.stdout
    assert "REGRESSION GPT2" not in second.stdout
    # The JSON report is written before the gate decides, so CI uploads it on a red night too.
    assert len(Report.model_validate_json((cluster.tmp / "n2.json").read_text()).results) == 4


def test_real_architectures_through_celery_match_the_in_process_path(shared_redis, pg_url, make_cluster):
    cluster = make_cluster(shared_redis, pg_url, run_hook="", arch_timeout_s=120.0, visibility_timeout_s=300.0)
    cluster.start_worker("w1", concurrency=2)
    cluster.wait_ready()
    dist = compat(cluster, "sweep", "--broker", *arch_args(), "--json", str(cluster.tmp / "celery.json"))
    assert dist.returncode == 0, dist.stdout + dist.stderr
    local = compat(cluster, "sweep", "--jobs", "0", "--no-store", *arch_args(), "--json", str(cluster.tmp / "in.json"))
    assert local.returncode == 0, local.stdout + local.stderr

    def outcome(path):
        recs = Report.model_validate_json(path.read_text()).results
        return {r.key: (r.status, r.blocking_op, r.metrics.get("n_params")) for r in recs}

    via_celery, in_process = outcome(cluster.tmp / "celery.json"), outcome(cluster.tmp / "in.json")
    assert len(via_celery) == 4 and via_celery == in_process

    # Each architecture's captured output travels with its results from the worker too: the runner's phase lines,
    # each check's piece on its own record, together the whole log in order.
    logs: dict[str, str] = {}
    for r in Report.model_validate_json((cluster.tmp / "celery.json").read_text()).results:
        logs[r.architecture] = logs.get(r.architecture, "") + (r.log or "")
    assert set(logs) == set(ARCHS)
    for arch, log in logs.items():
        assert [ln for ln in log.splitlines() if ln.startswith(f"[compat] {arch} on ")] == [
            f"[compat] {arch} on neuron: {phase}" for phase in ("build", "reference", "load", "forward")], log
