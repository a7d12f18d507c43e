"""The Celery app's reliability settings, derived from compat settings, and the refusals for unsafe ones."""

from __future__ import annotations

import pytest

from compat.settings import Settings
from worker.orchestration.celery_app import (
    CLAIMING_REDIS_TRANSPORT,
    NIGHTLY_TASK,
    RUN_ARCHITECTURE_TASK,
    SUBMISSION_TASK,
    ConfigError,
    beat_argv,
    celery_config,
    make_app,
    worker_argv,
)


def settings(**kw) -> Settings:
    return Settings(broker_url="redis://127.0.0.1:6379/0", **kw)


def test_reliability_settings():
    conf = celery_config(settings(arch_timeout_s=300, task_hard_grace_s=30, visibility_timeout_s=600,
                                  worker_max_tasks_per_child=7, worker_max_memory_mb=2048))
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"] and conf["task_retry_on_worker_lost"]
    assert conf["worker_prefetch_multiplier"] == 1
    limits = conf["task_annotations"][RUN_ARCHITECTURE_TASK]
    assert (limits["soft_time_limit"], limits["time_limit"]) == (300, 330)
    assert conf["task_annotations"][SUBMISSION_TASK] == limits
    assert conf["broker_transport_options"]["visibility_timeout"] == 600 > limits["time_limit"]
    assert conf["worker_max_tasks_per_child"] == 7 and conf["worker_max_memory_per_child"] == 2048 * 1024  # KiB
    assert conf["accept_content"] == ["json"] and conf["task_serializer"] == "json"
    assert conf["result_backend"] == "redis://127.0.0.1:6379/0"  # defaults to the broker
    assert conf["broker_connection_max_retries"] is None  # a Redis restart never ends a worker
    # A Redis restart mid-fetch cannot drop a message (test_faults.py); other brokers keep kombu's transport.
    assert conf["broker_transport"] == CLAIMING_REDIS_TRANSPORT
    assert celery_config(Settings(broker_url="amqp://guest@localhost//"))["broker_transport"] is None


def test_the_defaults_are_consistent():
    conf = celery_config(settings())
    hard = conf["task_annotations"][RUN_ARCHITECTURE_TASK]["time_limit"]
    assert conf["broker_transport_options"]["visibility_timeout"] > hard


def test_the_nightly_planner_is_not_under_the_per_architecture_limit():
    """Issue 12: with app-wide limits, a loaded worker killed the nightly planner (SoftTimeLimitExceeded while
    importing torch) at the architecture's soft limit. The limits are per task, and the nightly's do not follow
    arch_timeout_s; it is acked on receipt, so a limit past the visibility timeout cannot redeliver it."""
    s = settings(arch_timeout_s=6, task_hard_grace_s=2, visibility_timeout_s=9)
    conf = celery_config(s)
    assert "task_soft_time_limit" not in conf and "task_time_limit" not in conf  # no app-wide limit
    app = make_app(s)
    app.loader.import_default_modules()  # the worker's registry: tasks with the annotations applied
    tasks = app.tasks
    nightly, per_arch = tasks[NIGHTLY_TASK], tasks[RUN_ARCHITECTURE_TASK]
    assert (per_arch.soft_time_limit, per_arch.time_limit, per_arch.acks_late) == (6, 8, True)
    assert (tasks[SUBMISSION_TASK].soft_time_limit, tasks[SUBMISSION_TASK].time_limit) == (6, 8)
    assert nightly.soft_time_limit >= 600 and nightly.time_limit > nightly.soft_time_limit
    assert nightly.acks_late is False
    assert celery_config(settings(arch_timeout_s=60))["task_annotations"][NIGHTLY_TASK] == \
        conf["task_annotations"][NIGHTLY_TASK]


def test_unsafe_or_missing_configuration_is_refused():
    with pytest.raises(ConfigError, match="must exceed the hard time limit"):
        celery_config(settings(arch_timeout_s=300, task_hard_grace_s=30, visibility_timeout_s=330))
    with pytest.raises(ConfigError, match="COMPAT_BROKER_URL"):
        celery_config(Settings(broker_url=""))


def test_app_registers_tasks_queue_and_schedule():
    app = make_app(settings(celery_queue="q7"))
    assert app.conf.task_default_queue == "q7" and "worker.orchestration.tasks" in app.conf.include
    assert app.conf.beat_schedule["nightly-sweep"]["options"] == {"queue": "q7"}
    assert "--queues=q7" in worker_argv(settings(celery_queue="q7"), concurrency=2)
    assert beat_argv(settings(var_dir="/tmp/x"))[-1] == "--schedule=/tmp/x/celerybeat-schedule"
