"""docker-compose.yml, run without Docker: each service's command and healthcheck, exactly as written there,
as processes against the Redis and PostgreSQL running here (hosts and ports mapped, nothing else changed)."""

from __future__ import annotations

import json
import os
import shelve
import socket
import subprocess
import time

import yaml
from dist_env import REPO, VENV_BIN, free_port

from compat.results import NIGHTLY_CHECKS, ArchitectureEntry
from compat.settings import Settings
from worker.catalog.catalog import Catalog, write_snapshot
from worker.orchestration.celery_app import NIGHTLY_TASK

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())


def service(name: str) -> dict:
    return COMPOSE["services"][name]


def shell_of(cmd: list[str] | str) -> str:
    """A healthcheck's test as a shell line; compose turns $$ into a literal $."""
    if isinstance(cmd, str):
        return cmd
    kind, *rest = cmd
    line = rest[0] if kind == "CMD-SHELL" else subprocess.list2cmdline(rest)
    return line.replace("$$", "$")


# Only against a hang: how long services take to start or plan is not what these tests assert, and a loaded
# 2-core CI machine can take minutes (pytest-timeout's 600 s ends the test anyway).
HANG_GUARD_S = 300


def hang_guard(done, describe, procs: dict[str, subprocess.Popen]) -> None:
    """Wait until ``done()``; fail at once when a service process exits, and after HANG_GUARD_S as a hang."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not done():
        assert all(p.poll() is None for p in procs.values()), describe()
        assert time.monotonic() < deadline, f"hang guard ({HANG_GUARD_S} s): {describe()}"
        time.sleep(0.2)


def test_compose_env_names_only_real_settings_and_services_have_health_and_restart():
    fields = {f"COMPAT_{n.upper()}" for n in Settings.model_fields}
    for name in ("migrate", "api", "worker", "beat"):
        env = service(name)["environment"]
        assert set(env) <= fields, set(env) - fields
        Settings(**{k.removeprefix("COMPAT_").lower(): v.split(":-")[-1].rstrip("}") if v.startswith("${") else v
                    for k, v in env.items()})  # every default value parses
    for name in ("redis", "postgres", "api", "worker", "beat"):
        assert service(name)["restart"] == "unless-stopped" and "healthcheck" in service(name)
    assert service("migrate")["restart"] == "no"
    for name in ("api", "worker", "beat"):
        assert service(name)["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    # Scalable: nothing that would collide between worker replicas.
    assert not {"container_name", "ports", "hostname"} & set(service("worker"))
    assert "--appendonly" in service("redis")["command"]


def test_compose_services_run_as_processes(shared_redis, pg_url, make_cluster):
    cluster = make_cluster(shared_redis, pg_url)
    snapshot = cluster.tmp / "snapshot.json"
    write_snapshot(Catalog(source="hub", snapshot_id=None, entries=[
        ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1),
        ArchitectureEntry(name="GPT2LMHeadModel", model_type="gpt2", rank=2)]), snapshot, endpoint="test", limit=2)
    plan_file = cluster.tmp / "fake-plan.json"
    plan_file.write_text(json.dumps({"marker_dir": str(cluster.markers)}))
    port = free_port()

    def env_for(name: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COMPAT_")}
        env |= {k: v for k, v in service(name)["environment"].items() if not v.startswith("${")}
        env |= cluster.env()  # compose hostnames -> local servers; a private queue, schema and var dir
        env["COMPAT_RESULT_BACKEND"] = env["COMPAT_BROKER_URL"]
        assert "redis:6379" not in str(env) and "@postgres:" not in str(env)
        env |= {"COMPAT_CATALOG_SOURCE": "snapshot", "COMPAT_CATALOG_SNAPSHOT": str(snapshot),
                "FAKEARCH_PLAN": str(plan_file), "HOSTNAME": socket.gethostname(),
                "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
        return env

    def command(name: str) -> list[str]:
        return [str(port) if a == "8000" else a for a in service(name)["command"]]

    def health(name: str) -> subprocess.CompletedProcess:
        line = shell_of(service(name)["healthcheck"]["test"]).replace(":8000/", f":{port}/")
        return subprocess.run(["sh", "-c", line], env=env_for(name), cwd=REPO, capture_output=True, text=True,
                              timeout=HANG_GUARD_S)

    migrate = subprocess.run(command("migrate"), env=env_for("migrate"), cwd=REPO, capture_output=True, text=True,
                             timeout=HANG_GUARD_S)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr

    procs = {}
    for name in ("api", "worker", "beat"):
        log = (cluster.tmp / f"{name}.log").open("w")
        procs[name] = subprocess.Popen(command(name), env=env_for(name), cwd=REPO, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
    cluster.workers.update(procs)  # stopped (SIGTERM, then SIGKILL) by the fixture
    hang_guard(lambda: all(marker in cluster.log(n) for n, marker in
                           (("worker", "ready."), ("beat", "beat: Starting"), ("api", "Application startup complete"))),
               lambda: {n: cluster.log(n)[-2000:] for n in procs}, procs)
    for name in ("api", "worker", "beat"):
        check = health(name)
        assert check.returncode == 0, (name, check.stdout, check.stderr)
    # Beat persisted its schedule: the nightly sweep at the default 02:00 UTC, on the workers' queue.
    with shelve.open(str(cluster.tmp / "var" / "celerybeat-schedule"), "r") as state:
        nightly = state["entries"]["nightly-sweep"]
    assert nightly.task == NIGHTLY_TASK and nightly.options["queue"] == cluster.settings.celery_queue
    assert nightly.schedule.hour == {2} and nightly.schedule.minute == {0}

    # What beat sends at 02:00, sent now: the worker plans the nightly from the catalog and fans it out.
    from service import queries
    from service.store import Store

    store = Store(pg_url)
    cluster.app().send_task(NIGHTLY_TASK, queue=cluster.settings.celery_queue)

    def nightly_outcome() -> list[str]:
        return [line for line in cluster.log("worker").splitlines()
                if f"{NIGHTLY_TASK}[" in line and ("succeeded in" in line or "raised" in line or "limit" in line)]

    # The planner's own outcome, however long a loaded machine takes: it must succeed, not hit a time limit.
    hang_guard(nightly_outcome, lambda: cluster.log("worker")[-3000:], procs)
    assert "succeeded in" in nightly_outcome()[0], cluster.log("worker")[-3000:]

    def nightly_run_id() -> str | None:
        with store.session() as s:
            page = queries.list_runs(s, trigger="nightly", per_page=1)
        return page.items[0].id if page.items else None

    # The nightly set: the four default checks and the fine-tuning ones (compat.results.NIGHTLY_CHECKS).
    expected = {(a, str(c)) for a in ("LlamaForCausalLM", "GPT2LMHeadModel") for c in NIGHTLY_CHECKS}
    hang_guard(lambda: (rid := nightly_run_id()) is not None and len(store.run_results(rid)) >= len(expected),
               lambda: cluster.log("worker")[-3000:], procs)
    run_id = nightly_run_id()
    assert {(r.architecture, str(r.check)) for r in store.run_results(run_id)} == expected
    assert store.finish_run(run_id) == "complete"
