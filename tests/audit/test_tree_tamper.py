"""The stored Merkle tree (the nodes proofs and roots are served from) is held against the tree
recomputed from the entries: a node changed or removed in the database is reported, with the
first entry it covers, on PostgreSQL and SQLite, though the entries themselves are intact."""

import pytest
from django.db import connection

import audit
from audit.choices import AuditAction
from audit.tree import position
from audit.verify import TreeCheck, verify_trail

pytestmark = pytest.mark.django_db


@pytest.fixture
def trail(settings):
    """Eleven entries (stored subtrees of 1, 2, 4 and 8 leaves), with the PostgreSQL
    append-only trigger on the tree switched off as an attacker would."""
    settings.AUDIT_CHECKPOINT_EVERY = 1000  # no checkpoint: only the tree can tell
    for i in range(11):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_audittreenode DISABLE TRIGGER USER")
    assert verify_trail().ok


def sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


@pytest.fixture(params=[20000, 4], ids=["one-read", "read-every-4"])
def chunk(request, monkeypatch):
    """Verify compares the tree a range at a time: whole here, or every 4 entries."""
    monkeypatch.setattr(TreeCheck, "CHUNK", request.param)


@pytest.mark.parametrize("level, index, first", [
    (0, 6, 7),  # the leaf of entry 7
    (1, 2, 5),  # the subtree over entries 5 and 6
    (3, 0, 1),  # the subtree over entries 1 to 8
])
def test_a_changed_tree_node_is_reported_at_the_first_entry_it_covers(trail, chunk, level,
                                                                      index, first):
    sql("UPDATE audit_audittreenode SET hash = %s WHERE position = %s",
        ["ab" * 32, position(level, index)])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, first, "edited")
    assert "stored Merkle tree node" in report.problem
    assert report.count == 11  # the entries themselves still verify


def test_a_removed_tree_node_is_reported(trail, chunk):
    sql("DELETE FROM audit_audittreenode WHERE position = %s", [position(2, 1)])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 5, "edited")
    assert "entries 5 to 8" in report.problem


def test_an_untouched_tree_after_more_appends_still_verifies(trail, chunk):
    for i in range(20):
        audit.record(actor="bob", action=AuditAction.ROLE_GRANTED, target=f"user:v{i}")
    report = verify_trail()
    assert report.ok and report.count == 31
