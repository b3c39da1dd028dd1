"""An API write's audit entry is readable right after the write returns, placed or shown
pending, even when another writer holds the placing lock at that moment (PostgreSQL; SQLite
serialises writers, so there it is always placed at once)."""

import psycopg
import pytest
from django.db import connection

from audit import placing
from audit.models import AuditPendingEntry

# Real commits: each request's transaction ends, as in production (a test transaction would
# hold the placing lock itself from its first entry on).
pytestmark = pytest.mark.django_db(transaction=True)

SPEC = {"framework": "langgraph", "connector": {"type": "sandbox"}, "model": "gpt-4.1",
        "tools": ["orders.lookup", "payments.refund"],
        "actions": {"payments.refund": {"approval_above": 5000, "max": 50000}}}


@pytest.fixture
def another_writer_placing():
    """Another session holds the placing lock, as a writer placing its batch does."""
    if connection.vendor != "postgresql":
        yield False
        return
    settings = connection.settings_dict
    other = psycopg.connect(host=settings["HOST"], port=settings["PORT"] or None,
                            user=settings["USER"], password=settings["PASSWORD"] or None,
                            dbname=settings["NAME"], autocommit=True)
    other.execute("SET lock_timeout = '20s'")  # fail loudly, never hang, if a test holds it
    other.execute("SELECT pg_advisory_lock(%s)", [placing.KEY])
    try:
        yield True
    finally:
        other.close()  # the session's lock goes with it


def test_a_proposal_is_in_the_trail_right_after_it_is_made(people, refund_agent, api_as,
                                                          another_writer_placing):
    alice, dana = api_as(people.alice), api_as(people.dana)
    query = "/api/v1/audit/entries?actor=alice&action=proposal.created"
    earlier = len(dana.get(query).json()["results"])  # the fixture's own proposal
    made = alice.post("/api/v1/agents/refund-agent/proposals", {"spec": SPEC}, format="json")
    assert made.status_code == 201, made.content
    page = dana.get(query).json()
    mine = page["pending"] + page["results"][:len(page["results"]) - earlier]
    assert len(mine) == 1 and mine[0]["agent"] == "refund-agent"
    if another_writer_placing:  # it could not be placed: it is shown, pending, not hidden
        assert len(page["results"]) == earlier and mine[0]["seq"] is None and mine[0]["pending"]
        assert AuditPendingEntry.objects.filter(actor="alice").exists()
    else:
        assert page["pending"] == [] and mine[0]["seq"] is not None


def test_a_later_page_lists_no_pending_entries(people, api_as, another_writer_placing):
    dana = api_as(people.dana)
    assert "pending" not in dana.get("/api/v1/audit/entries?before=1").json()
