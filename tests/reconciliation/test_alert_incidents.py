"""One alert line per incident, not per finding: a bad deployment that changes three things
makes one `drift.detected` line (and one toast) naming its three findings and linking to them;
a later finding of the same incident replaces that line instead of adding one."""

import json

import pytest
from django.db import connection, transaction

from reconciliation import actions, alerts
from reconciliation.actions.common import alert
from reconciliation.models import AlertEvent, Finding
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent, start_daphne, stop_daphne
from tests.reconciliation.test_alerts_websocket import open_alerts


def bad_deployment(people, name: str = "payouts-agent", mode: str = "escalate"):
    agent = approved_agent(people, name, enforcement={"default": mode})
    actions.reconcile_agent(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    return agent


@pytest.mark.django_db
def test_a_bad_deployment_makes_one_line_naming_its_findings(people, client, api_as):
    agent = bad_deployment(people)
    findings = sorted(Finding.objects.filter(agent=agent).values_list("pk", flat=True))
    assert len(findings) == 3
    for event in ("drift.detected", "escalation.opened"):
        lines = AlertEvent.objects.filter(event=event, agent_name=agent.name)
        assert lines.count() == 1, event
        line = lines.get().to_message()
        assert sorted(line["findings"]) == findings
        assert "2 more findings from the same change (3 in this incident)" in line["line"]
        assert line["severity"] == "high"
    link = AlertEvent.objects.get(event="drift.detected").payload["link"]

    # The link is the incident: its three findings, on the page and in the API.
    client.force_login(people.dana)
    page = client.get(link)
    assert page.status_code == 200
    assert "3 findings." in page.content.decode()
    listed = api_as(people.dana).get("/api/v1/findings?" + link.split("?", 1)[1]).json()
    assert sorted(f["id"] for f in listed["results"]) == findings

    # The overview's feed draws one line for the incident.
    overview = client.get("/").content.decode()
    assert overview.count('data-event="drift.detected"') == 1


@pytest.mark.django_db
def test_an_owner_is_linked_to_the_agent_page_not_the_findings_list(people, client):
    agent = bad_deployment(people)
    [line] = [a for a in alerts.recent(people.alice) if a["event"] == "drift.detected"]
    assert line["link"] == f"/agents/{agent.name}/"
    [line] = [a for a in alerts.recent(people.dana) if a["event"] == "drift.detected"]
    assert line["link"].startswith("/findings/?incident=")


@pytest.mark.django_db
def test_the_incident_filter_refuses_a_bad_id(people, api_as):
    answer = api_as(people.dana).get("/api/v1/findings?incident=abc")
    assert answer.status_code == 400


@pytest.fixture
def daphne(transactional_db, redis_client):
    server = start_daphne()
    yield server
    stop_daphne(server)


def frames(socket, *, until_quiet: float = 1.5) -> list[dict]:
    got = []
    while True:
        try:
            got.append(json.loads(socket.recv(timeout=until_quiet)))
        except TimeoutError:
            return got


def test_a_websocket_client_gets_one_alert_per_incident_and_updates_to_it(people, daphne):
    agent = approved_agent(people, "payouts-agent", enforcement={"default": "escalate"})
    actions.reconcile_agent(agent.pk, trigger="approved")
    with open_alerts(daphne, people.dana) as socket:
        frames(socket, until_quiet=0.5)  # whatever setting the agent up announced
        sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                               reason="bad")
        actions.reconcile_agent(agent.pk, trigger="observation")
        got = [f for f in frames(socket) if f["event"] == "drift.detected"]
        assert len(got) == 1
        assert len(got[0]["findings"]) == 3
        assert got[0]["link"] == f"/findings/?incident={min(got[0]['findings'])}"

        # A later finding of the same incident (sent after the first line was delivered)
        # replaces the line: the message names the line it replaces.
        first = Finding.objects.get(pk=min(got[0]["findings"]))
        late = Finding.objects.create(
            agent=agent, fingerprint="late", kind="tool_added", pointer="/tools/late.tool",
            severity="medium", area="tools", generation=first.generation,
            observed_at=first.observed_at, detected_at=first.detected_at,
            first_seen=first.first_seen, last_seen=first.last_seen,
            cause_key=first.cause_key, cause=first.cause)  # the same deployment's
        try:
            with transaction.atomic():
                alert("drift.detected", agent, late)
        finally:
            connection.close()
        [update] = [f for f in frames(socket) if f["event"] == "drift.detected"]
    assert update["replaces"] == got[0]["id"]
    assert len(update["findings"]) == 4
    assert update["severity"] == "high"  # the incident's worst, not the late one's
    assert "(4 in this incident)" in update["line"]
    assert AlertEvent.objects.filter(event="drift.detected",
                                     agent_name=agent.name).count() == 1
