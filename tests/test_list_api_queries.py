"""Every list API and console page costs the same number of queries for a small and a ten times
larger fleet with work waiting on every agent (an escalated finding and a pending proposal
each): pages of rows, never a query per row."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bench.cluster import build_cluster, build_open_work

pytestmark = pytest.mark.django_db

# The lists whose rows grow with the fleet built here.
PATHS = ["/api/v1/agents", "/api/v1/dashboard", "/api/v1/findings", "/api/v1/escalations",
         "/api/v1/proposals", "/api/v1/guardrails", "/api/v1/inbox", "/api/v1/fleet",
         "/api/v1/recertification", "/api/v1/group-rules", "/api/v1/toxic-combinations",
         "/api/v1/toxic-combinations/paths",
         "/api/v1/audit", "/api/v1/tokens"]
# The console's pages, as the admin (who may open every one) sees them.
PAGES = ["/", "/agents/", "/agents/bench-00001/", "/findings/", "/escalations/",
         "/approvals/", "/inbox/", "/fleet/", "/guardrails/", "/recertification/", "/audit/",
         "/toxic/", "/tokens/", "/group-rules/"]


# The approvers' queues: a page reads one query per kind of row it shows (proposals,
# escalations), so a page the growth filled with escalations alone may cost one query fewer.
QUEUES = {"/api/v1/inbox", "/inbox/"}


def queries(client: APIClient, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(captured.captured_queries)


def grow(count: int, first: int = 0) -> None:
    build_open_work(build_cluster(count, first=first), every=1)


@pytest.mark.parametrize("path", PATHS)
def test_a_list_costs_the_same_queries_for_5_or_60_agents(people, path):
    client = APIClient()
    client.force_authenticate(people.admin)
    grow(5)
    queries(client, path)  # once-per-process lookups (content types, control row) out of the way
    few = queries(client, path)
    grow(55, first=5)
    assert queries(client, path) <= few if path in QUEUES else queries(client, path) == few


@pytest.mark.parametrize("path", PAGES)
def test_a_page_costs_the_same_queries_for_5_or_60_agents(people, client, path):
    client.force_login(people.admin)
    grow(5)
    queries(client, path)
    few = queries(client, path)
    grow(55, first=5)
    assert queries(client, path) <= few if path in QUEUES else queries(client, path) == few


def test_the_list_counts_each_agents_pending_proposals(people, refund_agent):
    from registry import actions
    from registry.choices import VersionSource
    from tests.conftest import refund_manifest

    build_cluster(3)
    actions.apply_manifests([refund_manifest(tools=["orders.lookup"])], actor=people.alice,
                            source=VersionSource.YAML)
    client = APIClient()
    client.force_authenticate(people.dana)
    listed = {a["name"]: a["pending_proposals"]
              for a in client.get("/api/v1/agents").json()["results"]}
    assert listed == {"refund-agent": 1, "bench-00000": 0, "bench-00001": 0, "bench-00002": 0}
