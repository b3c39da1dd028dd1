"""Tampering through raw SQL (as a database superuser would) is caught at the exact seq."""

import json

import pytest
from django.db import connection
from django.test import override_settings

import audit
from audit.chain import entry_hash
from audit.choices import AuditAction
from audit.verify import fetch_chunk, verify_trail

pytestmark = pytest.mark.django_db


@pytest.fixture
def trail():
    """Ten entries, with the PostgreSQL append-only trigger switched off as an attacker would."""
    for i in range(10):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}",
                     after={"roles": ["owner"], "i": i})
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
            cursor.execute("ALTER TABLE audit_auditcheckpoint DISABLE TRIGGER USER")
    assert verify_trail().ok


def sql(statement: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


def insert_row(row: dict) -> None:
    columns = ", ".join(row)
    marks = ", ".join(["%s"] * len(row))
    values = [json.dumps(v) if k in ("before", "after") else v for k, v in row.items()]
    sql(f"INSERT INTO audit_auditentry ({columns}) VALUES ({marks})", values)


def test_an_altered_row_is_reported_at_its_seq(trail):
    sql("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 4")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 4)
    assert "does not match its hash" in report.problem


def test_a_deleted_row_is_reported_as_missing(trail):
    sql("DELETE FROM audit_auditentry WHERE seq = 6")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 6)
    assert "missing" in report.problem


def test_deleting_the_newest_rows_is_caught_by_the_head(trail):
    sql("DELETE FROM audit_auditentry WHERE seq >= 9")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 9)


def test_an_inserted_row_with_a_valid_looking_hash_breaks_the_next_link(trail):
    # Make room after seq 5 and slip in a forged entry that links correctly to 5.
    sql("UPDATE audit_auditentry SET seq = seq + 100 WHERE seq > 5")
    sql("UPDATE audit_auditentry SET seq = seq - 99 WHERE seq > 100")
    five = fetch_chunk(4, 1)[0]
    forged = {**five, "seq": 6, "actor": "mallory", "target": "user:mallory",
              "prev_hash": five["hash"]}
    forged["hash"] = entry_hash(forged)
    forged["at"] = five["at"].replace("Z", "+00:00")
    insert_row(forged)
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 7)
    assert "does not link" in report.problem


def test_two_swapped_rows_are_reported_at_the_first(trail):
    sql("UPDATE audit_auditentry SET seq = 1000 WHERE seq = 3")
    sql("UPDATE audit_auditentry SET seq = 3 WHERE seq = 4")
    sql("UPDATE audit_auditentry SET seq = 4 WHERE seq = 1000")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 3)


@override_settings(AUDIT_CHECKPOINT_EVERY=4)
def test_a_wholly_rehashed_chain_is_caught_by_the_signed_checkpoint(db):
    for i in range(10):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    if connection.vendor == "postgresql":
        sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    # Rewrite entry 2 and re-hash everything after it, so every link and hash is consistent.
    rows = fetch_chunk(0, 100)
    rows[1]["actor"] = "mallory"
    previous = rows[0]["hash"]
    for row in rows[1:]:
        row["prev_hash"] = previous
        row["hash"] = entry_hash(row)
        previous = row["hash"]
    sql("DELETE FROM audit_auditentry WHERE seq >= 2")
    for row in rows[1:]:
        insert_row({**row, "at": row["at"].replace("Z", "+00:00")})
    sql("UPDATE audit_auditchainhead SET hash = %s", [previous])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 4)
    assert "signed checkpoint" in report.problem


@override_settings(AUDIT_CHECKPOINT_EVERY=4)
def test_a_checkpoint_re_signed_without_the_key_is_refused(db):
    for i in range(5):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    if connection.vendor == "postgresql":
        sql("ALTER TABLE audit_auditcheckpoint DISABLE TRIGGER USER")
    sql("UPDATE audit_auditcheckpoint SET signature = %s WHERE seq = 4", ["0" * 64])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 4)
    assert "invalid signature" in report.problem
