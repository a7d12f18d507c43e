"""Fixtures of the distributed tests: real Redis, real PostgreSQL, real `compat worker` processes.

Each test gets a private PostgreSQL schema and its own queue name; workers are started exactly as compose does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from dist_env import HERE, REPO, VENV_BIN, free_port  # noqa: F401 - re-exported to fixtures

from compat.results import ArchitectureEntry, Check, DeviceInfo, RunInfo, Trigger
from compat.settings import Settings
from worker.orchestration.executors import SweepPlan

# ``pg_schema`` (the private-schema PostgreSQL helper, shared with tests/service) lives in tests/helpers.
_HELPERS = str(Path(__file__).parents[1] / "helpers")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)

from pg_schema import ensure_postgres, private_schema  # noqa: E402 - needs the path set above

SHARED_REDIS = "redis://127.0.0.1:6379"
REDIS_DB = 13  # this area's own DB number on the shared Redis


def _redis_up(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=2).ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def shared_redis() -> str:
    url = f"{SHARED_REDIS}/{REDIS_DB}"
    if not _redis_up(url) and shutil.which("redis-server"):
        subprocess.run(["redis-server", "--daemonize", "yes", "--port", "6379", "--save", "", "--appendonly", "no"],
                       capture_output=True, timeout=30)
        time.sleep(0.5)
    if not _redis_up(url):
        pytest.skip("Redis on 127.0.0.1:6379 is down and could not be started: distributed tests NOT RUN")
    return url


@pytest.fixture(scope="session")
def pg_user() -> str:
    user = ensure_postgres()
    if user is None:
        pytest.skip("PostgreSQL on 127.0.0.1:5432 is down and could not be started: distributed tests NOT RUN")
    return user


@pytest.fixture
def pg_url(pg_user: str) -> Iterator[str]:
    """A private schema per test: concurrent sessions and earlier tests never share rows."""
    with private_schema(pg_user, "dist_") as url:
        yield url


class OwnRedis:
    """A private redis-server that a test may kill and restart. Append-only file with fsync on every write,
    as docker-compose.yml runs Redis: a restart keeps queued and unacknowledged tasks."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not _redis_up(self.url):
            if time.monotonic() > deadline:
                raise RuntimeError("own redis-server did not start")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if not shutil.which("redis-server"):
        pytest.skip("redis-server binary missing: Redis restart test NOT RUN")
    server = OwnRedis(tmp_path / "redis")
    server.start()
    yield server
    server.kill()


def worker_command(concurrency: int, hostname: str) -> list[str]:
    """Exactly the worker service's command in docker-compose.yml (plus a node name, as replicas have hosts)."""
    return [str(VENV_BIN / "compat"), "worker", "--concurrency", str(concurrency), "--hostname", hostname]


class Cluster:
    """Settings shared by the submitting test and its `compat worker` processes, plus those processes."""

    def __init__(self, broker_url: str, database_url: str, tmp: Path, **knobs: object) -> None:
        self.tmp = tmp
        self.markers = tmp / "markers"
        self.database_url = database_url
        self.env_knobs = {"broker_url": broker_url, "database_url": database_url,
                          "celery_queue": f"test-{uuid.uuid4().hex[:10]}", "var_dir": str(tmp / "var"),
                          "run_hook": "fakearch:run", "arch_timeout_s": 6.0, "task_hard_grace_s": 2.0,
                          "visibility_timeout_s": 9.0, "restore_interval_s": 1.0, "crash_retries": 1, **knobs}
        self.settings = Settings(**self.env_knobs)
        self.workers: dict[str, subprocess.Popen] = {}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COMPAT_")}
        env.update({f"COMPAT_{k.upper()}": str(v) for k, v in self.env_knobs.items()})
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO)])
        return env

    def start_worker(self, name: str, concurrency: int = 1) -> subprocess.Popen:
        """`compat worker` (what compose's worker service runs), in its own process group like a container."""
        log = (self.tmp / f"{name}.log").open("w")
        proc = subprocess.Popen(worker_command(concurrency, f"{name}@test"),
                                cwd=REPO, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.workers[name] = proc
        return proc

    def wait_ready(self, timeout: float = 240) -> None:
        """Until every worker logs ``ready.``; the timeout is only a hang guard (a loaded machine is slow)."""
        deadline = time.monotonic() + timeout
        for name, proc in self.workers.items():
            while "ready." not in self.log(name):
                if proc.poll() is not None:
                    raise RuntimeError(f"worker {name} exited {proc.returncode}:\n{self.log(name)[-3000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {name} not ready:\n{self.log(name)[-3000:]}")
                time.sleep(0.1)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def kill9(self, name: str) -> None:
        """kill -9 the whole worker (main process and pool children), as `docker kill` would."""
        os.killpg(self.workers[name].pid, signal.SIGKILL)
        self.workers[name].wait(10)

    def executions(self, arch: str) -> list[Path]:
        return sorted(self.markers.glob(f"{arch}.*"))

    def stop(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.workers.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def app(self):  # noqa: ANN201 - a Celery app
        from worker.orchestration.celery_app import make_app

        return make_app(self.settings)

    def entry(self, name: str, rank: int = 1, **behaviour: object) -> ArchitectureEntry:
        return ArchitectureEntry(name=name, model_type="fake", rank=rank,
                                 config={"marker_dir": str(self.markers), **behaviour})

    def plan(self, entries: list[ArchitectureEntry], trigger: Trigger = Trigger.MANUAL,
             checks: tuple[Check, ...] = (Check.LOAD, Check.FORWARD)) -> SweepPlan:
        run = RunInfo(trigger=trigger, device=DeviceInfo(name="neuron", simulated=True), checks=list(checks))
        return SweepPlan(run=run, entries=entries, checks=list(checks), database_url=self.database_url,
                         workdir=self.tmp / "work")


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator:
    clusters: list[Cluster] = []

    def make(broker_url: str, database_url: str, **knobs: object) -> Cluster:
        cluster = Cluster(broker_url, database_url, tmp_path / f"c{len(clusters)}", **knobs)
        cluster.tmp.mkdir(parents=True)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


@pytest.fixture
def store(pg_url: str):  # noqa: ANN201 - service.store.Store
    from service.store import Store

    return Store(pg_url)
