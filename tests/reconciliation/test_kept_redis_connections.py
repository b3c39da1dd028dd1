"""The work queues keep their Redis connections: django_rq's `get_queue` opens a new one on
every call, which a changed report paid (its toxic-path check), as did every pending decision,
fleet refresh and job enqueued elsewhere. Once a process has used a queue, the loop's
requests and passes open none (counted here by the sockets this process opens)."""

import pytest
import redis
import redis.asyncio.connection
import redis.connection

from reconciliation import actions
from runtime.actions import decisions
from tests.conftest import approved_with_client
from tests.reconciliation.test_heartbeats import PUSH, report_of


@pytest.fixture
def sockets_opened(monkeypatch):
    """Where this process opened a Redis socket (a connect on a connection that had none)."""
    opened: list[str] = []
    for kind in (redis.connection.AbstractConnection,
                 redis.asyncio.connection.AbstractConnection):
        def counting(self, *args, _connect=kind.connect, **kwargs):
            if getattr(self, "_sock", None) is None and getattr(self, "_writer", None) is None:
                opened.append(f"{self.host}:{self.port}/{self.db}")
            return _connect(self, *args, **kwargs)

        monkeypatch.setattr(kind, "connect", counting)
    return opened


@pytest.mark.django_db
def test_reports_passes_and_decisions_reuse_the_queues_connections(
        people, redis_client, sockets_opened, django_capture_on_commit_callbacks):
    agent, client = approved_with_client(people, **PUSH)
    path = f"/api/v1/agents/{agent.name}/observed-state"

    def round_of(i: int) -> None:
        report = report_of(agent, f"extra.tool{i}")  # changed: a pass, a toxic-path check
        with django_capture_on_commit_callbacks(execute=True):
            assert client.put(path, report, format="json").status_code == 202
            asked = client.post(f"/api/v1/agents/{agent.name}/decisions",
                                {"tool": "payments.refund", "arguments": {"amount": 640}},
                                format="json").json()
        assert asked["outcome"] == "pending", asked
        with django_capture_on_commit_callbacks(execute=True):
            decisions.decide_pending(asked["id"], actor=people.carol, allow=False,
                                     comment="not this one")
        redis_client.flushdb()  # the waiting keys: every round queues again
        actions.reconcile_agent(agent.pk, trigger="observation")

    round_of(0)  # the first use of each queue in this process opens its connection
    pool = redis_client.connection_pool
    fresh = redis.Redis(connection_pool=redis.ConnectionPool(
        connection_class=pool.connection_class, **pool.connection_kwargs))
    fresh.ping()  # the counter sees a connection opened (a fresh client's)
    fresh.close()
    warm = len(sockets_opened)
    assert warm > 0
    for i in range(1, 4):
        round_of(i)
    assert sockets_opened[warm:] == []
