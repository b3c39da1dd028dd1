"""The agent list API and the dashboard cost the same number of queries for a small and a ten times
larger fleet (pages of rows, never a query per row)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bench.cluster import build_cluster

pytestmark = pytest.mark.django_db

# The lists whose rows grow with the fleet built here (findings and the audit trail have their
# own query-count tests in tests/reconciliation/test_pages.py and tests/audit/test_api.py).
PATHS = ["/api/v1/agents", "/api/v1/dashboard"]


def queries(client: APIClient, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(captured.captured_queries)


@pytest.mark.parametrize("path", PATHS)
def test_a_list_costs_the_same_queries_for_5_or_60_agents(people, path):
    client = APIClient()
    client.force_authenticate(people.dana)
    build_cluster(5)
    queries(client, path)  # once-per-process lookups (content types, control row) out of the way
    few = queries(client, path)
    build_cluster(55, first=5)
    assert queries(client, path) == few


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
