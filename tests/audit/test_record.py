"""audit.record: entries link into one chain, in the caller's transaction, append-only."""

import pytest
from django.db import connection, transaction
from django.test import override_settings

import audit
from audit.actions import tree_root
from audit.chain import GENESIS_HASH, entry_hash
from audit.choices import AuditAction
from audit.models import AppendOnlyError, AuditCheckpoint, AuditEntry
from audit.verify import fetch_chunk, verify_trail

pytestmark = pytest.mark.django_db


def append(n: int) -> list[AuditEntry]:
    return [
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}",
                     agent="refund-agent", before={"roles": []}, after={"roles": ["owner"]},
                     reason="test")
        for i in range(n)
    ]


def test_entries_link_each_to_the_previous_and_hash_their_content():
    first, second, third = append(3)
    assert [first.seq, second.seq, third.seq] == [1, 2, 3]
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.hash and third.prev_hash == second.hash
    stored = fetch_chunk(0, 10)
    assert [entry_hash(row) for row in stored] == [row["hash"] for row in stored]
    assert verify_trail().to_dict() == {
        "ok": True, "count": 3, "head_hash": third.hash, "first_broken_seq": None,
        "problem": None, "checkpoints": 0, "reason": None, "pending": 0,
        "root": tree_root(3),
    }


def test_values_that_json_normalises_still_verify_after_the_round_trip():
    audit.record(actor="bob", action=AuditAction.ROLE_GRANTED, target="t",
                 before={"limits": (1, 2.5), "ünïcode": "✓"}, after={"big": 10**15, "z": None})
    assert verify_trail().ok


def test_an_entry_rolled_back_with_its_change_leaves_no_trace():
    append(1)
    with pytest.raises(RuntimeError), transaction.atomic():
        append(1)
        raise RuntimeError("the change failed")
    assert AuditEntry.objects.count() == 1
    append(1)
    assert list(AuditEntry.objects.values_list("seq", flat=True)) == [1, 2]
    assert verify_trail().ok


def test_rows_cannot_be_changed_or_deleted_through_the_orm():
    (entry,) = append(1)
    entry.reason = "rewritten"
    with pytest.raises(AppendOnlyError):
        entry.save()
    with pytest.raises(AppendOnlyError):
        entry.delete()
    with pytest.raises(AppendOnlyError):
        AuditEntry.objects.filter(seq=1).update(reason="x")
    with pytest.raises(AppendOnlyError):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.get(seq=1).reason == "test"


def test_raw_sql_changes_are_refused_by_postgresql_and_caught_by_verify_elsewhere():
    """PostgreSQL's trigger refuses the change; SQLite has no trigger, but verify names it."""
    from django.db.utils import DatabaseError

    append(1)
    for statement in ("UPDATE audit_auditentry SET reason = 'x'", "DELETE FROM audit_auditentry"):
        if connection.vendor == "postgresql":
            with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(statement)
            assert AuditEntry.objects.get(seq=1).reason == "test"
        else:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(statement)
            assert verify_trail().first_broken_seq == 1
            break


@override_settings(AUDIT_CHECKPOINT_EVERY=3)
def test_every_nth_entry_is_signed_as_a_checkpoint():
    entries = append(7)
    checkpoints = list(AuditCheckpoint.objects.values_list("seq", "head_hash"))
    assert checkpoints == [(3, entries[2].hash), (6, entries[5].hash)]
    assert verify_trail().checkpoints == 2


def test_unknown_action_names_are_refused():
    with pytest.raises(ValueError):
        audit.record(actor="x", action="made.up", target="t")
    assert AuditEntry.objects.count() == 0
