"""`compat worker` checks that the broker persists its queue (Redis AOF) and says so when it does not, or cannot tell.

The Redis client is replaced by a stand-in answering CONFIG GET as a server would (no server needed).
"""

from __future__ import annotations

import pytest
import redis

from worker.orchestration import celery_app


class FakeRedis:
    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer

    def config_get(self, name: str) -> dict[str, str]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return {name: self.answer}


@pytest.mark.parametrize(("answer", "expect"), [
    ("yes", None),
    ("no", "the broker does not persist its queue (appendonly is 'no')"),
    (redis.ResponseError("unknown command 'CONFIG'"), "could not check that the broker persists its queue"),
    (redis.ConnectionError("refused"), "could not check that the broker persists its queue"),
])
def test_worker_warns_unless_the_broker_has_an_append_only_file(monkeypatch: pytest.MonkeyPatch, answer,  # noqa: ANN001
                                                                 expect: str | None) -> None:
    monkeypatch.setattr(celery_app.redis.Redis, "from_url", classmethod(lambda cls, url, **kw: FakeRedis(answer)))
    got = celery_app.broker_persistence_warning("redis://127.0.0.1:6379/0")
    assert (got is None) if expect is None else (expect in got), got


def test_a_broker_that_is_not_redis_is_not_asked() -> None:
    assert celery_app.broker_persistence_warning("amqp://guest@localhost//") is None
