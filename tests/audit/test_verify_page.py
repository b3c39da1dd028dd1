"""Dana verifies and exports the trail from the audit explorer: the result is a page (range
proven, checkpoints, witnesses; or the first bad entry and why), not the API's JSON."""

import json

import pytest

import audit
from audit.choices import AuditAction
from audit.models import AuditCheckpoint
from tests.audit.attacker import unbind_columns
from tests.audit.test_api import streamed
from tests.audit.test_tamper import sql, trail  # noqa: F401 (the tampered-trail fixture)

pytestmark = pytest.mark.django_db


def test_the_explorer_offers_verify_and_export(people, client):
    client.force_login(people.dana)
    page = client.get("/audit/").content.decode()
    assert 'href="/audit/verify/"' in page and 'action="/api/v1/audit/export"' in page


def test_an_intact_trail_shows_the_range_proven_and_its_checkpoints(people, client):
    client.force_login(people.dana)
    client.get("/api/v1/audit/export", {"format": "jsonl"})  # an export signs a checkpoint
    response = client.get("/audit/verify/")
    page = response.content.decode()
    checkpoint = AuditCheckpoint.objects.order_by("-seq").first()
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert 'data-ok="true"' in page and "The trail is intact" in page
    assert f"latest covers entries 1 to {checkpoint.seq}" in page
    assert "entries 1 to " in page and "Signed checkpoints" in page


def test_a_tampered_trail_names_the_first_bad_entry_and_why(people, client, trail):  # noqa: F811
    unbind_columns()
    sql("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 4")
    client.force_login(people.dana)
    page = client.get("/audit/verify/").content.decode()
    assert 'data-ok="false"' in page and "First bad entry</dt><dd>#4" in page
    assert "<strong>edited</strong>" in page and "entries 1 to 3" in page


def test_export_from_the_page_downloads_the_signed_trail(people, client):
    audit.record(actor="bob", action=AuditAction.ROLE_GRANTED, target="user:erin")
    client.force_login(people.dana)
    response = client.get("/api/v1/audit/export", {"format": "jsonl"})
    lines = [json.loads(line) for line in streamed(response).splitlines()]
    assert response.status_code == 200 and "audit-trail.jsonl" in response["Content-Disposition"]
    assert any(line.get("entry", {}).get("target") == "user:erin" for line in lines)


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_only_compliance_verifies_or_exports(people, client, who):
    client.force_login(getattr(people, who))
    assert client.get("/audit/verify/").status_code == 403
    assert client.get("/api/v1/audit/export").status_code == 403
    assert 'href="/audit/verify/"' not in client.get("/").content.decode()
