"""The fleet view as a snapshot the workers keep: dana's fleet and toxic pages and their APIs
read what the refresh job stored, say how old it is, name at most MAX_NAMES agents beside whole
counts, and a change they read queues one refresh, however many changes come at once."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rq import Queue
from rq.registry import ScheduledJobRegistry

from reconciliation import fleet, fleet_snapshot, timeline_chart
from reconciliation.jobs import refresh_fleet_snapshot
from reconciliation.models import Finding, FleetSnapshot
from registry import actions
from registry.models import Guardrail
from tests.conftest import approved_agent
from tests.reconciliation.test_fleet_view import dev_agent, fleet_of, make_rules

pytestmark = pytest.mark.django_db


def test_the_page_and_api_show_what_the_job_stored_until_it_runs_again(people, client, api_as,
                                                                        redis_client):
    approved_agent(people, "refund-agent")
    make_rules(people)
    assert refresh_fleet_snapshot()["agents"] == 1
    first = FleetSnapshot.objects.get()
    dev_agent(people, "lonely")  # no rule covers it; the stored view does not know it yet
    dana = api_as(people.dana)
    body = dana.get("/api/v1/fleet").json()
    assert (body["agents"], body["uncovered"], body["uncovered_count"]) == (1, [], 0)
    assert body["as_of"] == first.as_of.isoformat().replace("+00:00", "Z")
    assert body["age_seconds"] >= 0 and body["refreshing"] is False
    refresh_fleet_snapshot()
    body = dana.get("/api/v1/fleet").json()
    assert (body["agents"], body["uncovered"], body["uncovered_count"]) == (2, ["lonely"], 1)
    assert body["as_of"] > first.as_of.isoformat().replace("+00:00", "Z")
    client.force_login(people.dana)
    page = client.get("/fleet/").content.decode()
    assert "s ago</time>" in page and 'data-refreshing="false"' in page
    assert '<a href="/agents/lonely/">lonely</a>' in page


def test_a_page_says_when_a_newer_view_is_on_its_way(people, client, redis_client):
    approved_agent(people, "refund-agent")
    refresh_fleet_snapshot()
    redis_client.set(fleet_snapshot.QUEUED_KEY, "1")
    client.force_login(people.dana)
    for path in ("/fleet/", "/toxic/"):
        page = client.get(path).content.decode()
        assert 'data-refreshing="true"' in page and "refreshing</strong> now" in page


def test_with_no_snapshot_yet_the_first_reader_computes_it_then_everyone_reads_it(
        people, api_as, redis_client):
    approved_agent(people, "refund-agent")
    make_rules(people)
    dana = api_as(people.dana)
    assert not FleetSnapshot.objects.exists()
    assert dana.get("/api/v1/fleet").json()["agents"] == 1
    assert FleetSnapshot.objects.count() == 1
    with CaptureQueriesContext(connection) as read:
        dana.get("/api/v1/fleet")
    fleet_of(people, 5)
    with CaptureQueriesContext(connection) as again:
        assert dana.get("/api/v1/fleet").json()["agents"] == 1  # the stored view
    assert len(again.captured_queries) == len(read.captured_queries)
    assert sum("fleetsnapshot" in q["sql"] for q in read.captured_queries) == 1


def test_lists_of_names_are_capped_and_the_counts_stay_whole(people, api_as, client,
                                                              monkeypatch, redis_client):
    monkeypatch.setattr(fleet, "MAX_NAMES", 2)
    fleet_of(people, 5)  # env=dev: the prod guardrail does not pick them
    make_rules(people)
    refresh_fleet_snapshot()
    body = api_as(people.dana).get("/api/v1/fleet").json()
    assert body["uncovered"] == ["agent-0", "agent-1"] and body["uncovered_count"] == 5
    client.force_login(people.dana)
    page = client.get("/fleet/").content.decode()
    assert '<strong class="uncovered-count">5</strong> agents; the first 2 by name' in page
    assert '<a href="/agents/agent-1/">' in page and '<a href="/agents/agent-2/">' not in page


def test_toxic_paths_are_capped_with_their_count(people, api_as, monkeypatch, redis_client):
    monkeypatch.setattr(fleet_snapshot, "MAX_PATHS", 1)
    approved_agent(people, "mailer", tools=["email.send_external"])
    for name in ("support", "triage"):
        approved_agent(people, name, data=[{"resource": "customers_db", "access": "read"}],
                       delegates_to=["mailer"])
    make_rules(people)
    refresh_fleet_snapshot()
    body = api_as(people.alice).get("/api/v1/toxic-combinations/paths").json()
    assert body["approved_count"] == 2
    assert [p["agents"] for p in body["approved"]] == [["support", "mailer"]]


def test_the_compliance_chart_draws_the_agents_out_of_policy_first_with_counts(
        people, redis_client, monkeypatch):
    monkeypatch.setattr(timeline_chart, "FLEET_ROWS", 1)
    fleet_of(people, 3)
    drifted = approved_agent(people, "refund-agent")
    Finding.objects.create(agent=drifted, fingerprint="f", kind="tool_added",
                           pointer="/tools/crm.search", severity="high", area="tools",
                           status="open", generation=1)
    refresh_fleet_snapshot()
    view = FleetSnapshot.objects.get().fleet
    assert view["compliance"] == {"agents": 4, "out_of_policy": 1}
    assert view["open_findings"] == {"refund-agent": 1} and view["open_findings_agents"] == 1
    chart = view["charts"]["compliance"]
    assert "out of policy: 1 of 4" in chart["layout"]["title"]["text"].lower()
    assert {name for trace in chart["data"] for name in trace["y"]} == {"refund-agent"}


def test_changes_the_view_reads_queue_one_refresh_for_the_whole_burst(
        people, redis_client, django_capture_on_commit_callbacks, settings):
    settings.FLEET_SNAPSHOT_DELAY_SECONDS = 5
    with django_capture_on_commit_callbacks(execute=True):
        approved_agent(people, "refund-agent")  # an approval
    with django_capture_on_commit_callbacks(execute=True):
        make_rules(people)  # a guardrail and a toxic combination saved
    queue = Queue("default", connection=redis_client)
    scheduled = ScheduledJobRegistry(queue=queue).get_job_ids()
    refreshes = [job_id for job_id in scheduled
                 if queue.fetch_job(job_id).func_name.endswith("refresh_fleet_snapshot")]
    assert len(refreshes) == 1
    refresh_fleet_snapshot()  # the job starts: the next change queues another
    assert not redis_client.exists(fleet_snapshot.QUEUED_KEY)
    with django_capture_on_commit_callbacks(execute=True):
        actions.delete_guardrail(Guardrail.objects.get(name="prod-refund-cap"),
                                 actor=people.dana)
    assert redis_client.exists(fleet_snapshot.QUEUED_KEY)


def test_the_resync_refreshes_a_snapshot_only_once_it_is_old(people, redis_client, settings):
    from datetime import timedelta

    from django.utils import timezone

    from reconciliation.jobs import resync

    settings.FLEET_SNAPSHOT_BACKSTOP_SECONDS = 300
    approved_agent(people, "refund-agent")
    refresh_fleet_snapshot()
    resync()
    assert not redis_client.exists(fleet_snapshot.QUEUED_KEY)  # fresh enough
    FleetSnapshot.objects.update(as_of=timezone.now() - timedelta(seconds=301))
    resync()
    assert redis_client.exists(fleet_snapshot.QUEUED_KEY)


def test_a_suspension_and_a_retirement_each_queue_a_refresh_and_the_retired_agent_leaves(
        people, redis_client, django_capture_on_commit_callbacks):
    from reconciliation.actions.common import suspend_agent

    agent = approved_agent(people, "refund-agent")
    approved_agent(people, "kept-agent")
    refresh_fleet_snapshot()
    assert FleetSnapshot.objects.get().fleet["agents"] == 2
    with django_capture_on_commit_callbacks(execute=True):
        suspend_agent(agent, actor=people.dana, reason="runaway spend")
    assert redis_client.exists(fleet_snapshot.QUEUED_KEY)  # the timeline shows suspensions
    refresh_fleet_snapshot()
    assert not redis_client.exists(fleet_snapshot.QUEUED_KEY)
    with django_capture_on_commit_callbacks(execute=True):
        retirement = actions.propose_retirement("refund-agent", actor=people.alice,
                                                reason="replaced")
        actions.approve_retirement(retirement.pk, actor=people.bob)
    assert redis_client.exists(fleet_snapshot.QUEUED_KEY)
    refresh_fleet_snapshot()
    assert FleetSnapshot.objects.get().fleet["agents"] == 1
