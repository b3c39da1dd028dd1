"""The http connector against a real local platform server: signed requests, idempotency
keys honoured, retries with backoff on 5xx, a clean failure when unreachable."""

import pytest

from reconciliation import actions
from reconciliation.connectors import ConnectorError
from reconciliation.connectors.http import HttpConnector
from reconciliation.models import ObservedState
from registry import actions as registry_actions
from registry.models import Agent
from tests.conftest import refund_manifest
from tests.reconciliation.platform_server import Platform

pytestmark = [pytest.mark.django_db, pytest.mark.long(minutes=1)]
SECRET = "s3cret-shared-with-the-platform"


@pytest.fixture
def platform(monkeypatch, settings):
    monkeypatch.setenv("PLATFORM_SECRET", SECRET)
    with Platform(SECRET) as server:
        allow_platform(settings, server)
        yield server


def allow_platform(settings, platform: Platform) -> dict[str, str]:
    """The admin's configuration for this platform (also as a worker's environment)."""
    env = {"CONNECTOR_SECRETS": "PLATFORM_SECRET",
           "CONNECTOR_ALLOWED_HOSTS": f"127.0.0.1:{platform.port}"}
    settings.CONNECTOR_SECRETS = env["CONNECTOR_SECRETS"].split(",")
    settings.CONNECTOR_ALLOWED_HOSTS = env["CONNECTOR_ALLOWED_HOSTS"].split(",")
    return env


def http_agent(people, platform) -> Agent:
    from django.contrib.auth.models import User

    if not User.objects.filter(connector_secret_grants__secret="PLATFORM_SECRET",
                               pk=people.alice.pk).exists():
        registry_actions.grant_connector_secret("PLATFORM_SECRET", people.alice,
                                                actor=people.admin)
    manifest = refund_manifest(
        enforcement={"default": "correct"},
        connector={"type": "http", "url": platform.url, "secret_env": "PLATFORM_SECRET"})
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    state = {k: v for k, v in manifest.spec.items() if k != "enforcement"}
    platform.states["refund-agent"] = {**state, "running": True,
                                       "tools": [*state["tools"], "crm.search"],
                                       "actions": {"payments.refund": {"max": 5000}}}
    return Agent.objects.get(name="refund-agent")


def test_the_connector_reads_and_corrects_the_platform_with_signed_keyed_changes(people,
                                                                                platform):
    agent = http_agent(people, platform)
    run = actions.reconcile_agent(agent.pk, trigger="manual")
    assert run.result == "corrected" and len(run.changes) == 2
    state = platform.states["refund-agent"]
    assert "crm.search" not in state["tools"]
    assert state["actions"]["payments.refund"] == {"approval_above": 500, "max": 5000}
    assert platform.apply_count == 2
    assert set(platform.applied) == {c["key"] for c in run.changes}
    assert ObservedState.objects.filter(agent=agent, source="http").count() == 2
    assert actions.reconcile_agent(agent.pk, trigger="manual").result == "converged"
    assert platform.apply_count == 2


def test_a_repeated_key_is_a_duplicate_on_the_platform(people, platform):
    agent = http_agent(people, platform)
    connector = HttpConnector(platform.url, "PLATFORM_SECRET")
    operation = {"op": "remove_tool", "target": "crm.search", "value": None}
    assert connector.apply(agent, operation, "key-1") == "applied"
    assert connector.apply(agent, operation, "key-1") == "duplicate"
    assert platform.apply_count == 1


def test_server_errors_are_retried_with_backoff(people, platform):
    agent = http_agent(people, platform)
    platform.fail_next = 2  # two 503s, then it answers
    assert actions.reconcile_agent(agent.pk, trigger="manual").result == "corrected"


def test_a_wrong_secret_or_an_unreachable_platform_fails_the_pass_cleanly(people, platform,
                                                                          monkeypatch):
    agent = http_agent(people, platform)
    monkeypatch.setenv("PLATFORM_SECRET", "wrong")
    with pytest.raises(ConnectorError, match="^platform unreachable$") as failure:
        actions.reconcile_agent(agent.pk, trigger="manual")
    assert "401" in failure.value.detail  # for the log; people see only "platform unreachable"
    assert agent.runs.latest("pk").result == "failed"
    monkeypatch.delenv("PLATFORM_SECRET")
    with pytest.raises(ConnectorError, match="^platform unreachable$") as failure:
        actions.reconcile_agent(agent.pk, trigger="manual")
    assert "not granted to alice, or not set" in failure.value.detail
    platform.__exit__()
    monkeypatch.setenv("PLATFORM_SECRET", SECRET)
    with pytest.raises(ConnectorError, match="^platform unreachable$"):
        actions.reconcile_agent(agent.pk, trigger="manual")
    assert platform.apply_count == 0
    assert set(agent.runs.values_list("error", flat=True)) == {"platform unreachable"}


def test_a_worker_killed_mid_correction_over_http_applies_nothing_twice(
        people, start_worker, redis_client, monkeypatch, transactional_db, settings):
    from reconciliation.controller.triggers import enqueue_reconcile
    from tests.conftest import assert_trail_whole, eventually

    monkeypatch.setenv("PLATFORM_SECRET", SECRET)
    with Platform(SECRET) as platform:
        env = allow_platform(settings, platform)
        agent = http_agent(people, platform)
        platform.states["refund-agent"]["data"].append({"resource": "crm", "access": "write"})
        platform.hold_change = 2
        first = start_worker(RECONCILE_LOCK_SECONDS="5", PLATFORM_SECRET=SECRET, **env)
        eventually(lambda: platform.changes_seen >= 2, timeout=60, message=first.output())
        first.kill()  # in the middle of the second change
        eventually(lambda: platform.apply_count >= 2, timeout=60)  # the held change lands
        second = start_worker(PLATFORM_SECRET=SECRET, **env)
        enqueue_reconcile(agent.pk, "manual")
        # The change in flight when the worker died landed without the pass recording it:
        # its drift is simply gone at the next pass (resolved); the others are corrected.
        try:
            eventually(lambda: sorted(agent.findings.values_list("status", flat=True))
                       == ["corrected", "corrected", "resolved"], timeout=120)
        except AssertionError:
            raise AssertionError(f"not finished; the second worker said:\n{second.output()}"
                                 ) from None
        state = platform.states["refund-agent"]
        assert "crm.search" not in state["tools"]
        assert all(d["resource"] != "crm" for d in state["data"])
        assert platform.apply_count == 3 and len(platform.applied) == 3  # none twice
    assert_trail_whole()


def test_a_platform_that_keeps_refusing_the_correction_goes_to_a_human(people, platform,
                                                                       settings):
    from reconciliation.models import Correction, Escalation, Finding

    settings.RECONCILE_MAX_ATTEMPTS = 3
    agent = http_agent(people, platform)
    platform.refuse_changes = True
    for _ in range(3):  # each pass tries the same keyed changes and is refused
        with pytest.raises(ConnectorError) as failure:
            actions.reconcile_agent(agent.pk, trigger="retry")
        assert "409" in failure.value.detail
    findings = Finding.objects.filter(agent=agent)
    assert sorted(findings.values_list("status", "attempts")) == [("open", 3), ("open", 3)]
    assert Correction.objects.filter(agent=agent).count() == 2  # same keys every time
    assert set(Correction.objects.filter(agent=agent).values_list("result", flat=True)) == {
        "failed"}
    held = actions.reconcile_agent(agent.pk, trigger="resync")  # no more calls: a human decides
    assert held.result == "drifted" and held.changes == []
    escalations = Escalation.objects.filter(agent=agent, status="open")
    assert escalations.count() == 2
    assert {e.reason for e in escalations} == {"correction failed at the platform 3 times"}
    assert set(findings.values_list("status", flat=True)) == {"escalated"}
    assert platform.apply_count == 0
    actions.reconcile_agent(agent.pk, trigger="resync")
    assert Escalation.objects.filter(agent=agent).count() == 2  # not opened again
