"""Bob's queues stay fast and whole however long they grow: /inbox/, /approvals/,
/escalations/, /findings/, GET /api/v1/inbox and GET /api/v1/proposals come a page at a time
for the same number of queries at 3 or 30 waiting incidents; walking the pages shows every
item exactly once, longest waiting (or most urgent) first across the pages, an incident's
escalations always on one page; and the badge counts what the pages show."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.cluster import build_cluster
from reconciliation import inbox
from reconciliation.models import Escalation, Finding
from registry.models import Agent, DesiredStateVersion
from runtime import actions as runtime_actions
from tests.conftest import approved_agent

pytestmark = pytest.mark.django_db

PAGES = ["/inbox/", "/approvals/", "/escalations/", "/findings/", "/api/v1/inbox",
         "/api/v1/proposals"]


def waiting_work(count: int, first: int = 0, drifts: int = 2) -> None:
    """`count` agents, each with one bad change waiting for a person: an incident of `drifts`
    escalated findings from one pass, and the owner's pending proposal, made in bulk (at the
    bench's scale the actions would take minutes). The earlier an agent, the longer its
    work has waited."""
    agents = Agent.objects.filter(pk__in=build_cluster(count, first=first)).select_related(
        "active_version", "owner").order_by("name")
    start = timezone.now() - timedelta(hours=1)
    for n, agent in enumerate(agents):
        seen = start + timedelta(seconds=first + n)
        findings = Finding.objects.bulk_create(
            [Finding(agent=agent, fingerprint=f"t-{agent.pk}-{d}", kind="tool_added",
                     pointer=f"/tools/{d}", actual=f"tool-{d}", severity="high", area="tools",
                     operation={"op": "remove_tool", "target": f"tool-{d}"},
                     status="escalated", generation=1, cause_key="unknown", observed_at=seen,
                     detected_at=seen) for d in range(drifts)])
        for finding in findings:
            Escalation.objects.create(agent=agent, finding=finding, reason="needs a person")
        Escalation.objects.filter(agent=agent).update(opened_at=seen)
        version = DesiredStateVersion.objects.create(
            agent=agent, base_generation=1, spec=agent.active_version.spec,
            spec_sha256=agent.active_version.spec_sha256, state="pending", source="api",
            proposed_by=agent.owner, metadata=agent.active_version.metadata, comment="more")
        DesiredStateVersion.objects.filter(pk=version.pk).update(
            created_at=seen + timedelta(milliseconds=500))


def queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(captured.captured_queries)


@pytest.mark.parametrize("path", PAGES)
def test_a_queue_costs_the_same_queries_for_3_or_30_incidents(people, client, path):
    client.force_login(people.bob)
    waiting_work(3)
    queries(client, path)  # once-per-process lookups out of the way
    few = queries(client, path)
    waiting_work(27, first=3)
    assert queries(client, path) == few


def walk(client, path: str, pattern: str) -> list[list[str]]:
    """What each page of `path` shows (by `pattern`), following "Next" to the end."""
    pages, url = [], path
    while url:
        body = client.get(url).content.decode()
        pages.append(re.findall(pattern, body))
        following = re.search(r'<a href="\?([^"]*)" rel="next">', body)
        url = f"{path}?{following.group(1).replace('&amp;', '&')}" if following else ""
    return pages


def test_the_inbox_pages_show_every_item_once_most_urgent_first(people, client):
    waiting_work(30)  # 30 incidents and 30 proposals: 60 lines, 2 pages
    client.force_login(people.bob)
    pages = walk(client, "/inbox/", r'class="inbox-item" data-kind="\w+" data-key="([\w-]+)"')
    shown = [key for page in pages for key in page]
    queue = inbox.queue_for(people.bob)
    assert len(pages) == 2 and len(pages[0]) == 50
    assert shown == [e.key for e in queue]  # each once, in urgency order across pages
    assert {e.kind for e in queue} == {"incident", "proposal"}
    assert len(queue) == inbox.counts_for(people.bob)["total"] == 60


def test_the_inbox_tabs_page_too_and_keep_the_whole_queues_counts(people, client):
    waiting_work(60)
    client.force_login(people.bob)
    pages = walk(client, "/inbox/?kind=incident&sort=age",
                 r'class="inbox-item" data-kind="(\w+)" data-key="[\w-]+"')
    assert [len(page) for page in pages] == [50, 10]
    assert {kind for page in pages for kind in page} == {"incident"}
    body = client.get("/inbox/?kind=incident&page=2").content.decode()
    assert 'data-inbox-count="total">120<' in body


def test_the_approvals_pages_show_every_card_once_longest_waiting_first(people, client):
    waiting_work(30, drifts=3)
    client.force_login(people.bob)
    pages = walk(client, "/approvals/", r'<article class="card (?:proposal|escalation)" '
                                        r'aria-labelledby="((?:proposal|esc)-\d+)"')
    shown = [card for page in pages for card in page]
    assert [len(page) for page in pages] == [50, 10]
    assert len(set(shown)) == 60
    # each agent's incident waited half a second longer than its proposal
    incidents = Escalation.objects.order_by("opened_at", "pk")
    firsts = [f"esc-{e.pk}" for e in incidents if e.pk == min(
        x.pk for x in incidents if x.agent_id == e.agent_id)]
    proposals = [f"proposal-{pk}" for pk in DesiredStateVersion.objects.filter(
        state="pending").order_by("created_at").values_list("pk", flat=True)]
    assert shown == [card for pair in zip(firsts, proposals, strict=True) for card in pair]
    # an incident's three escalations are one card, decided once, never split over pages
    body = client.get("/approvals/?page=2").content.decode()
    assert body.count("One decision below resolves all 3 escalations of this incident") == 5


def test_the_escalations_pages_show_every_open_escalation_once_oldest_first(people, client):
    waiting_work(30)
    client.force_login(people.bob)
    pages = walk(client, "/escalations/",
                 r'<article class="card escalation" aria-labelledby="esc-(\d+)"')
    shown = [int(pk) for page in pages for pk in page]
    assert [len(page) for page in pages] == [50, 10]
    assert shown == list(Escalation.objects.order_by("opened_at", "pk")
                         .values_list("pk", flat=True))
    assert "60 open, oldest first" in client.get("/escalations/?page=2").content.decode()


def test_the_inbox_api_pages_show_every_item_once_with_the_whole_counts(people, api_as):
    waiting_work(30, drifts=3)
    bob = api_as(people.bob)
    seen, url = [], "/api/v1/inbox?page_size=7"
    while url:
        body = bob.get(url).json()
        assert (body["total"], body["escalations"], body["proposals"], body["count"]) == (
            60, 30, 30, 60)
        seen += body["items"]
        url = body["next"]
    assert [i["key"] for i in seen] == [e.key for e in inbox.queue_for(people.bob)]
    incidents = [i for i in seen if i["kind"] == "incident"]
    assert len(incidents) == 30 and all(len(i["escalations"]) == 3 for i in incidents)
    assert sorted(pk for i in incidents for pk in i["escalations"]) == sorted(
        Escalation.objects.values_list("pk", flat=True))
    only = bob.get("/api/v1/inbox?kind=proposal&page=2&page_size=20").json()
    assert (only["count"], len(only["items"]), only["total"]) == (30, 10, 60)


def test_the_proposals_api_pages_never_overlap(people, api_as):
    waiting_work(30)
    bob = api_as(people.bob)
    seen, url = [], "/api/v1/proposals?page_size=8"
    while url:
        body = bob.get(url).json()
        seen += [p["id"] for p in body["results"]]
        url = body["next"]
    assert sorted(seen) == sorted(DesiredStateVersion.objects.values_list("pk", flat=True))
    assert len(seen) == len(set(seen)) == 60  # 30 approved versions and 30 proposals


def test_the_badge_counts_what_the_queue_shows_of_every_kind(people, client):
    from tests.registry.test_inbox_queue import bad_deployment, proposal_by_alice

    waiting_work(2)  # two incidents of two, two proposals
    bad_deployment(people)  # an incident of three from a real pass
    agent = approved_agent(people, "refund-agent")
    proposal_by_alice(agent, model="gpt-5")
    runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                                     actor=people.alice)
    lone = Finding.objects.create(agent=agent, fingerprint="b", kind="rate_limit_exceeded",
                                  pointer="/limits/customers_db/max_calls", actual=90,
                                  severity="high", area="behaviour", behaviour=True,
                                  status="escalated", generation=1)
    Escalation.objects.create(agent=agent, finding=lone, reason="read too much")
    Escalation.objects.create(agent=agent, finding=lone, reason="and again")
    for person in (people.bob, people.carol, people.alice):
        queue = inbox.queue_for(person)
        assert inbox.counts_for(person) == inbox.tally(queue), person
    counts = inbox.counts_for(people.bob)
    # incidents: two bulk ones, the bad deployment, the behaviour finding's two escalations
    assert (counts["escalations"], counts["decisions"], counts["proposals"]) == (4, 1, 3)
    client.force_login(people.bob)
    body = client.get("/inbox/").content.decode()
    assert re.search(r'id="inbox-count"[^>]*>8<', body)
    assert body.count('class="inbox-item"') == 8
