"""The Celery application of distributed sweeps: broker and result backend from settings, every reliability knob.

`celery -A worker.orchestration.celery_app worker` (what `compat worker` and docker-compose run) loads ``app`` from here.
"""

from __future__ import annotations

import logging
from queue import Empty
from time import monotonic, time
from typing import Any
from urllib.parse import urlparse

import redis
from celery import Celery
from celery.schedules import crontab
from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from compat.results import PINNED_LANE, TRANSFORMERS_LATEST_LANE
from compat.settings import Settings, get_settings
from worker.run.process.pool import WORKER_IDLE_FLOOR_MB

# Task names are part of the wire protocol between submitters and workers: keep them stable.
RUN_ARCHITECTURE_TASK = "compat.run_architecture"
NIGHTLY_TASK = "compat.nightly_sweep"
SUBMISSION_TASK = "compat.run_submission"


class ConfigError(ValueError):
    """The settings would make the cluster unreliable (e.g. redelivery before the hard time limit)."""


# The nightly task's own limits, a hang guard only. It plans (reads the catalog, resolves the device: imports torch,
# seconds to minutes on a busy machine) and publishes one task per architecture; it never runs a model, so the
# per-architecture limit says nothing about it. Under that limit a loaded worker killed the planner while it
# imported torch._dynamo (issue 12).
NIGHTLY_SOFT_TIME_LIMIT_S = 1800.0
NIGHTLY_TIME_LIMIT_S = NIGHTLY_SOFT_TIME_LIMIT_S + 60.0


def time_limits(settings: Settings) -> tuple[float, float]:
    """(soft, hard) seconds for one architecture task."""
    soft = settings.arch_timeout_s
    return soft, soft + settings.task_hard_grace_s


def task_annotations(settings: Settings) -> dict[str, dict[str, Any]]:
    """Per-task limits. There is deliberately no app-wide time limit: Celery would apply it to every task without
    its own (the nightly planner included), and a task cannot opt out of it."""
    soft, hard = time_limits(settings)
    per_architecture = {"soft_time_limit": soft, "time_limit": hard}
    return {
        RUN_ARCHITECTURE_TASK: per_architecture,
        # A submission runs one architecture in its pool process: the same limits.
        SUBMISSION_TASK: per_architecture,
        # Acked on receipt: its limit may exceed the visibility timeout, and a redelivered nightly would plan and
        # submit a second run. A worker lost mid-plan loses that night's run; the next night's runs as usual.
        NIGHTLY_TASK: {"soft_time_limit": NIGHTLY_SOFT_TIME_LIMIT_S, "time_limit": NIGHTLY_TIME_LIMIT_S,
                       "acks_late": False},
    }


# Take the oldest message of the first non-empty list and record it as unacknowledged, in one atomic step.
# KEYS[1] the unacked hash, KEYS[2] its index (delivery time per tag), KEYS[3..] the lists in priority order;
# ARGV[1] now. The hash entry is kombu's own ([payload, exchange, routing_key], built around the raw payload so
# nothing is re-encoded), so kombu's visibility-timeout restore and its acks work on it unchanged.
_CLAIM_LUA = """
for i = 3, #KEYS do
  local raw = redis.call('RPOP', KEYS[i])
  if raw then
    local ok, message = pcall(cjson.decode, raw)
    local props = ok and type(message) == 'table' and message['properties']
    local info = props and props['delivery_info']
    local tag = props and props['delivery_tag']
    if type(info) == 'table' and type(tag) == 'string' then
      redis.call('ZADD', KEYS[2], ARGV[1], tag)
      redis.call('HSET', KEYS[1], tag,
                 '[' .. raw .. ',' .. cjson.encode(info['exchange']) .. ',' .. cjson.encode(info['routing_key']) .. ']')
    end
    return {KEYS[i], raw}
  end
end
return false
"""


class ClaimingRedisChannel(kombu_redis.Channel):
    """kombu's Redis channel with an atomic fetch: no message is ever out of both its queue and the unacked hash.

    Stock kombu takes a message with BRPOP and only then, in a second command, writes it to the unacked hash that
    the visibility timeout restores from. A Redis restart between the two (or a reply lost with the connection)
    drops the message for good: the architecture never runs and its run never completes (the Redis-restart
    fault test lost one task in ~1 of 6 runs on a loaded 2-core machine, its AOF showing the pop and no unacked
    entry). Here the blocking wait takes nothing: BLMOVE of a list onto its own tail is a no-op that returns once
    the list has a message. The take is a Lua script that pops and records the message as unacknowledged at
    once, so a message whose consumer never hears of it is redelivered after the visibility timeout like any
    other unacked one, and run_pair's idempotence keeps that redelivery from storing anything twice.
    Needs Redis >= 6.2 (BLMOVE); docker-compose.yml runs 7.4."""

    _claim_keys: list[str] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.global_keyprefix:
            # kombu's prefixing client prefixes only the first key of an EVALSHA; the claim has several.
            raise ConfigError("the claiming Redis transport does not support global_keyprefix")
        self._claim_script = self._create_client().register_script(_CLAIM_LUA)

    def _claim(self, keys: list[str]) -> tuple[str, Any] | None:
        with self.conn_or_acquire() as client:
            claimed = self._claim_script(keys=[self.unacked_key, self.unacked_index_key, *keys], args=[time()],
                                         client=client)
        if not claimed:
            return None
        key, raw = claimed
        return bytes_to_str(key), loads(bytes_to_str(raw))

    def _brpop_start(self, timeout: float | None = None) -> None:
        # kombu's BRPOP start, but waiting without taking (see the class docstring).
        if timeout is None:
            timeout = self.brpop_timeout
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return
        self._claim_keys = [self._q_for_pri(queue, pri) for pri in self.priority_steps for queue in queues]
        first = self._claim_keys[0]
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()
        self.client.connection.send_command("BLMOVE", first, first, "RIGHT", "RIGHT", timeout or 0)

    def _brpop_read(self, **options: Any) -> bool:
        try:
            try:
                peeked = self.client.parse_response(self.client.connection, "BLMOVE", **options)
            except self.connection_errors:
                # As kombu does: drop the connection so the next poll reconnects it.
                self.client.connection.disconnect()
                raise
            # Closing (kombu reads the pending reply first): nothing was taken, so there is nothing to restore;
            # claiming now would only take a message to hand it back.
            # The wait watches only the first list (one blocking command cannot watch several without taking):
            # with more than one list, a timed-out wait still claims, so the others are served once a second.
            if self._closing or (peeked is None and len(self._claim_keys) < 2):
                raise Empty()
            claimed = self._claim(self._claim_keys)
            if claimed is None:  # another consumer claimed it first
                raise Empty()
            key, payload = claimed
            queue = key.rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(queue)
            self.connection._deliver(payload, queue)
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    def _get(self, queue: str) -> Any:
        # basic_get: the same atomic claim, without waiting.
        claimed = self._claim([self._q_for_pri(queue, pri) for pri in self.priority_steps])
        with self.conn_or_acquire() as client:
            self._maybe_update_queues_expire(client, queue)
        if claimed is None:
            raise Empty()
        return claimed[1]


class ClaimingRedisTransport(kombu_redis.Transport):
    """The Redis transport with ``ClaimingRedisChannel`` (``broker_transport`` for redis:// brokers)."""

    Channel = ClaimingRedisChannel


CLAIMING_REDIS_TRANSPORT = f"{__name__}:ClaimingRedisTransport"


def broker_transport(broker_url: str) -> str | None:
    """The kombu transport for ``broker_url``: the claiming one for Redis, else kombu's choice by URL scheme."""
    return CLAIMING_REDIS_TRANSPORT if urlparse(broker_url).scheme in ("redis", "rediss") else None


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration for ``settings``; a pure function so tests can assert each knob."""
    if not settings.broker_url:
        raise ConfigError("COMPAT_BROKER_URL is empty: distributed mode needs a broker (e.g. redis://redis:6379/0)")
    if settings.worker_max_memory_mb <= WORKER_IDLE_FLOOR_MB:
        # Celery recycles a pool process above this RSS after each task: below a warm worker's idle size, every
        # architecture would pay a fresh torch import.
        raise ConfigError(f"worker_max_memory_mb ({settings.worker_max_memory_mb}) must exceed a warm worker's idle "
                          f"size (~{WORKER_IDLE_FLOOR_MB} MB)")
    hard = time_limits(settings)[1]
    if settings.visibility_timeout_s <= hard:
        # Redis re-queues an unacked message after the visibility timeout. If that came before the hard limit,
        # a still-running (slow but healthy) architecture would be handed to a second worker and run twice.
        raise ConfigError(f"visibility_timeout_s ({settings.visibility_timeout_s}) must exceed the hard time "
                          f"limit ({hard} = arch_timeout_s + task_hard_grace_s)")
    return {
        "broker_url": settings.broker_url,
        # Results of tasks (small summaries) go next to the queue unless a separate backend is named.
        "result_backend": settings.result_backend or settings.broker_url,
        # JSON only: a pickle payload from the broker would be code execution on every worker.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_default_queue": settings.celery_queue,
        # Redis: a message is never out of both its queue and the unacked hash (ClaimingRedisChannel), so a
        # broker restart mid-fetch cannot drop an architecture.
        "broker_transport": broker_transport(settings.broker_url),
        # Ack after the task body returns, not on receipt: a worker killed mid-architecture leaves the message
        # unacked in Redis, which hands it to another worker after the visibility timeout.
        "task_acks_late": True,
        # When the pool process dies under a task (segfault, OOM killer, kill -9), do not ack the message as
        # failed: put it back so the architecture is retried (bounded by the next two settings).
        "task_reject_on_worker_lost": True,
        # ...retried as a new message carrying retries+1, so a process-killing architecture is rerun at most
        # `crash_retries` times (the task's max_retries) and then recorded as `crash` instead of looping forever.
        "task_retry_on_worker_lost": True,
        # A hard time limit or a final failure is acked: rerunning an architecture that timed out would time
        # out again, and its `timeout`/`crash` record is already written by the worker.
        "task_acks_on_failure_or_timeout": True,
        # Reserve only the task being run: long architectures are not hoarded by a busy worker while another
        # idles, and a killed worker strands at most one message.
        "worker_prefetch_multiplier": 1,
        # Soft limit raises inside the task (recorded as `timeout` there); the hard limit kills a process stuck
        # in native code, and the worker's main process records `timeout` and carries on with a new process.
        # Per task (see task_annotations): the architecture's limits are not the nightly planner's.
        "task_annotations": task_annotations(settings),
        # Recycle pool processes: torch, transformers' lazy modules and the device's caches grow per model, and
        # a leak in one architecture must not OOM the next. Count bounds slow growth, memory (KiB) big steps.
        "worker_max_tasks_per_child": settings.worker_max_tasks_per_child,
        "worker_max_memory_per_child": settings.worker_max_memory_mb * 1024,
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout_s,
            # Sweep for abandoned (unacked, past the visibility timeout) messages every restore_interval_s
            # instead of kombu's default 10 x 10 s, so a dead worker's task is picked up promptly.
            "unacked_restore_interval": settings.restore_interval_s,
            "unacked_restore_throttle": 1,
            # Notice a broker that vanished without closing the socket (failover, NAT) instead of hanging.
            "socket_keepalive": True,
            "health_check_interval": 10,
        },
        # A Redis restart must not end a worker: reconnect forever, at startup too (compose starts workers
        # in parallel with Redis).
        "broker_connection_retry": True,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        # Publishing (the sweep's fan-out) rides out a Redis restart of up to about a minute.
        "task_publish_retry": True,
        "task_publish_retry_policy": {"max_retries": 40, "interval_start": 0, "interval_step": 0.5,
                                      "interval_max": 2},
        # Result writes retry through a backend restart too instead of failing a finished architecture.
        "result_backend_always_retry": True,
        "result_backend_max_retries": 40,
        "redis_backend_health_check_interval": 10,
        "result_expires": 7 * 24 * 3600,
        # Tasks still running when the broker connection drops keep running; their results go to the store,
        # and a redelivered copy finds them there and does not rerun (see tasks.run_pair).
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # A new pool process imports torch/transformers and resolves the device before taking tasks (seconds on a
        # busy machine); Celery's 4 s default would kill it as "not alive" and loop.
        "worker_proc_alive_timeout": 120,
        "task_track_started": True,
        "enable_utc": True,
        "timezone": "UTC",
        # Each worker process logs its task results; hijacking the root logger would hide the harness's logs.
        "worker_hijack_root_logger": False,
    }


def parse_cron(expr: str) -> crontab:
    """A five-field cron expression (minute hour day-of-month month day-of-week, UTC) as a Celery crontab."""
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"cron expression needs 5 fields (minute hour dom month dow), got {expr!r}")
    minute, hour, dom, month, dow = fields
    # crontab validates each field and raises ValueError on nonsense such as "61" or "*/0".
    return crontab(minute=minute, hour=hour, day_of_month=dom, month_of_year=month, day_of_week=dow)


def lane_queue(queue: str, lane: str) -> str:
    """The queue of a lane's tasks: the pinned lane's is ``queue``; another lane's workers (a newer transformers
    installed) serve ``<queue>-<lane>`` and fan their architectures out on it (their COMPAT_CELERY_QUEUE)."""
    return queue if lane == PINNED_LANE else f"{queue}-{lane}"


def beat_schedule(cron: str, queue: str, latest_lane_cron: str = "") -> dict[str, dict[str, Any]]:
    """The beat schedule: one nightly sweep with trigger ``nightly``, at ``cron`` (UTC); with ``latest_lane_cron``
    (COMPAT_LATEST_LANE_CRON) also the newest-Transformers lane's nightly, sent to that lane's queue."""
    schedule = {
        "nightly-sweep": {
            "task": NIGHTLY_TASK,
            "schedule": parse_cron(cron),
            "options": {"queue": queue},
        }
    }
    if latest_lane_cron:
        schedule[f"nightly-sweep-{TRANSFORMERS_LATEST_LANE}"] = {
            "task": NIGHTLY_TASK,
            "schedule": parse_cron(latest_lane_cron),
            "kwargs": {"lane": TRANSFORMERS_LATEST_LANE},
            "options": {"queue": lane_queue(queue, TRANSFORMERS_LATEST_LANE)},
        }
    return schedule


def make_app(settings: Settings | None = None) -> Celery:
    """A Celery app bound to ``settings`` with the sweep tasks and the nightly beat schedule registered."""
    settings = settings or get_settings()
    app = Celery("compat")
    app.conf.update(celery_config(settings))
    app.conf.beat_schedule = beat_schedule(settings.nightly_cron, settings.celery_queue, settings.latest_lane_cron)
    # Registers the shared tasks (and the worker-side failure recorder) on every app.
    app.conf.include = ["worker.orchestration.tasks"]
    return app


def client_app() -> Celery:
    """The app a submitting process (CLI, API) sends tasks with: the module's app when configured at import."""
    return app if app.conf.broker_url else make_app()


def _default_app() -> Celery:
    """The app `celery -A worker.orchestration.celery_app` finds; without a broker it is created unconfigured (e.g. at import
    in the in-process default) and refuses to start a worker, naming the missing setting."""
    settings = get_settings()
    if settings.broker_url:
        return make_app(settings)
    return Celery("compat", set_as_current=False)


app = _default_app()


def worker_argv(settings: Settings, *, concurrency: int | None = None, hostname: str | None = None,
                loglevel: str = "INFO") -> list[str]:
    """Arguments of ``app.worker_main`` for ``compat worker`` (and so for every compose worker replica)."""
    argv = ["worker", f"--loglevel={loglevel}", f"--queues={settings.celery_queue}",
            # Gossip/mingle are peer chatter for monitoring tools; without them a worker starts in under a
            # second and a broker restart does not replay a sync storm across replicas.
            "--without-gossip", "--without-mingle",
            # Fair: a task goes to an idle pool process, never queued behind a long architecture.
            "-O", "fair"]
    if concurrency is not None:
        argv.append(f"--concurrency={concurrency}")
    if hostname:
        argv.append(f"--hostname={hostname}")
    return argv


def beat_argv(settings: Settings, *, loglevel: str = "INFO") -> list[str]:
    """Arguments of ``app.start`` for ``compat beat``: the schedule's state file lives under var_dir."""
    schedule = settings.var_dir / "celerybeat-schedule"
    return ["beat", f"--loglevel={loglevel}", f"--schedule={schedule}"]


def broker_persistence_warning(broker_url: str, *, timeout_s: float = 5.0) -> str | None:
    """Why the broker may lose queued tasks on a restart, or None when it persists them. Redis persists its
    queue only with the append-only file (``appendonly yes``, https://redis.io/docs/latest/operate/oss_and_stack/
    management/persistence/); a Redis restart without it silently drops every queued task of a sweep."""
    if not broker_url.startswith(("redis://", "rediss://", "unix://")):
        return None
    try:
        value = redis.Redis.from_url(broker_url, socket_timeout=timeout_s).config_get("appendonly").get("appendonly")
    except redis.RedisError as exc:  # unreachable, or CONFIG disabled (managed Redis): say it was not checked
        return (f"could not check that the broker persists its queue (CONFIG GET appendonly: {exc}); it must run "
                "with appendonly yes, or a broker restart drops queued tasks")
    if value != "yes":
        return (f"the broker does not persist its queue (appendonly is {value!r}): a broker restart drops every "
                "queued task. Run Redis with --appendonly yes (docker-compose.yml does)")
    return None


def run_worker(concurrency: int | None = None, hostname: str | None = None, loglevel: str = "INFO") -> None:
    """``compat worker``: a Celery worker on the configured queue (blocks until shut down); warns first when the
    broker does not persist its queue."""
    settings = get_settings()
    warning = broker_persistence_warning(settings.broker_url)
    if warning:
        logging.getLogger(__name__).warning("WARNING: %s", warning)
    make_app(settings).worker_main(worker_argv(settings, concurrency=concurrency, hostname=hostname,
                                               loglevel=loglevel))


def run_beat(loglevel: str = "INFO") -> None:
    """``compat beat``: the scheduler that sends the nightly sweep at ``nightly_cron`` (UTC)."""
    settings = get_settings()
    settings.var_dir.mkdir(parents=True, exist_ok=True)
    make_app(settings).start(beat_argv(settings, loglevel=loglevel))
