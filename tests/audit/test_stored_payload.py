"""Verify hashes each entry's stored canonical payload instead of re-serialising it; the payload
is held to the row's columns, so editing either one (or blanking the payload) is still caught at
the entry, through the API and the command line, on PostgreSQL and SQLite."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

import audit
from audit.choices import AuditAction
from audit.models import AuditEntry
from tests.audit.attacker import DROP_BINDING

pytestmark = pytest.mark.django_db

# Content chosen to trip a payload read back wrongly: nested keys named like the top-level
# ones, quotes and the very text the leaf is spliced at, non-ASCII, numbers of every kind.
TRICKY = {
    "prev_hash": "f" * 64, "hash": "e" * 64,
    "q": 'a","prev_hash":"b', "text": "grüße ✓ \u2028 \\ \"", "n": [0, -1, 1.5, 1e-07, 10**20],
    "nested": {"before": None, "seq": 3, "z": {"prev_hash": "0" * 64}},
}


def sql(statement: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


@pytest.fixture
def trail(settings, people) -> list[int]:
    """The seqs of ten entries (odd ones with tricky content) under signed checkpoints, the
    append-only trigger switched off as an attacker with the database password would."""
    settings.AUDIT_CHECKPOINT_EVERY = 4
    seqs = []
    for i in range(10):
        entry = audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}",
                             before=TRICKY if i % 2 else None,
                             after={"roles": ["owner"], "i": i},
                             reason='said "yes", "prev_hash":"x"' if i == 5 else "")
        seqs.append(entry.seq)
    if connection.vendor == "postgresql":
        sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
        sql(DROP_BINDING)
    return seqs


def verify_as_compliance(people, api_as) -> dict:
    response = api_as(people.dana).get("/api/v1/audit/verify")
    assert response.status_code == 200
    return response.json()


def test_tricky_entries_verify_against_their_signed_tree_heads(trail, people, api_as):
    report = verify_as_compliance(people, api_as)
    assert report["ok"] and report["count"] == AuditEntry.objects.count() >= trail[-1]
    assert report["checkpoints"] >= 2
    assert AuditEntry.objects.get(seq=trail[5]).canonical  # the fast path was the one taken


# Each column changed in place while the stored payload is left as it was signed.
COLUMN_EDITS = {
    "actor": ("actor", "mallory"),
    "action": ("action", "role.revoked"),
    "target": ("target", "user:root"),
    "agent": ("agent", "refund-agent"),
    "reason": ("reason", "because"),
    "request_id": ("request_id", "req-1"),
    "after": ("after", json.dumps({"roles": ["owner", "admin"], "i": 3})),
    "after, same value spelled 3.0": ("after", json.dumps({"roles": ["owner"], "i": 3.0})),
    "before, nested key": ("before", json.dumps({**TRICKY, "nested": {"seq": 4}})),
}


@pytest.mark.parametrize("edit", COLUMN_EDITS, ids=list(COLUMN_EDITS))
def test_a_column_edited_under_its_stored_payload_is_caught_at_its_entry(
        trail, people, api_as, edit):
    column, value = COLUMN_EDITS[edit]
    seq = trail[3]  # an odd one: it carries the tricky `before`
    sql(f"UPDATE audit_auditentry SET {column} = %s WHERE seq = %s", [value, seq])
    report = verify_as_compliance(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (False, seq, "edited")


def test_a_moved_timestamp_is_caught_at_its_entry(trail, people, api_as):
    moved = AuditEntry.objects.get(seq=trail[7]).at + timedelta(seconds=1)
    sql("UPDATE audit_auditentry SET at = %s WHERE seq = %s", [moved, trail[7]])
    report = verify_as_compliance(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, trail[7], "edited")


def test_a_payload_edited_with_its_column_is_caught_by_the_hash(trail, people, api_as):
    entry = AuditEntry.objects.get(seq=trail[6])
    sql("UPDATE audit_auditentry SET actor = 'mallory', canonical = %s WHERE seq = %s",
        [entry.canonical.replace('"actor":"alice"', '"actor":"mallory"'), entry.seq])
    report = verify_as_compliance(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, entry.seq, "edited")
    assert "does not match its hash" in report["problem"]


@pytest.mark.parametrize("garbage", ["not json", '{"seq": 3', "[]", "\"\""])
def test_a_payload_replaced_by_garbage_is_named_not_an_error(trail, people, api_as, garbage):
    sql("UPDATE audit_auditentry SET canonical = %s WHERE seq = %s", [garbage, trail[2]])
    report = verify_as_compliance(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, trail[2], "edited")
    with pytest.raises(CommandError):
        call_command("audit", "verify", stdout=io.StringIO())


def test_entries_without_a_stored_payload_verify_from_their_columns(trail, people, api_as):
    # As rows written before payloads were stored: verify rebuilds each from its columns.
    sql("UPDATE audit_auditentry SET canonical = ''")
    assert verify_as_compliance(people, api_as)["ok"]
    sql("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = %s", [trail[9]])
    report = verify_as_compliance(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, trail[9], "edited")


def test_blanking_the_payload_of_an_edited_entry_does_not_hide_the_edit(trail, people, api_as):
    sql("UPDATE audit_auditentry SET reason = 'nothing to see', canonical = '' WHERE seq = %s",
        [trail[1]])
    report = verify_as_compliance(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, trail[1], "edited")
