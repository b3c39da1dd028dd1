"""Verify on PostgreSQL with each entry's columns held to its payload by the database's own
constraint (audit/binding.py): the trail hashed a range at a time (audit/verify_ranges.py), in
this process or in worker processes, proves exactly what the row-by-row walk proves, catches
what an attacker who leaves the constraint in place can still do, and goes back to checking
every row's columns when the constraint is dropped, renamed or left unvalidated."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import override_settings

import audit
from audit import binding, verify, verify_ranges
from audit.choices import AuditAction
from audit.models import AuditCheckpoint, AuditEntry
from audit.verify import Seed, iter_payloads, verify_trail, walk, walk_ranges
from tests.audit.attacker import unbind_columns
from tests.audit.test_stored_payload import TRICKY

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql",
                                reason="the constraint is PostgreSQL's (SQLite checks each row)")


def sql(statement: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


def record(count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}",
                     before=TRICKY if i % 3 == 0 else None,
                     after={"roles": ["owner"], "i": i, "n": 1.5 if i % 2 else 3},
                     reason='said "yes", "prev_hash":"x"' if i == 5 else "")


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 8 entries, so a short trail crosses several (the real ones are 65,536)."""
    monkeypatch.setattr(verify_ranges, "RANGE", 8)


def same_walk(found, expected) -> None:
    assert (found.count, found.head_hash, found.root, found.broken) == (
        expected.count, expected.head_hash, expected.root, expected.broken)
    assert found.roots_at == expected.roots_at and found.chain_at == expected.chain_at
    assert found.frontiers == expected.frontiers


@pytest.mark.django_db
@pytest.mark.parametrize("count", [1, 7, 8, 9, 45])
def test_the_range_walk_proves_what_the_row_walk_proves(small_ranges, count):
    record(count)
    sizes = {size for size in (1, 4, 8, 9, 16, 30, count) if size <= count}
    assert binding.columns_bound()
    same_walk(walk_ranges(count, sizes), walk(iter_payloads(count), sizes))


@pytest.mark.django_db
@pytest.mark.parametrize("boundary", [1, 5, 8, 13, 40])
def test_from_an_archive_boundary_the_range_walk_proves_the_same(small_ranges, boundary):
    record(45)
    whole = walk(iter_payloads(45), {boundary})
    seed = Seed(boundary, whole.chain_at[boundary], whole.frontiers[boundary])
    sizes = {boundary, 20, 45}
    same_walk(walk_ranges(45, sizes, seed),
              walk(iter_payloads(45, after=boundary), sizes, None, seed))
    assert walk_ranges(45, sizes, seed).root == whole.root


@pytest.mark.django_db
def test_the_database_refuses_a_column_that_differs_from_its_payload():
    record(3)
    sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")  # the attacker's first step
    for statement in ("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 2",
                      "UPDATE audit_auditentry SET after = '{\"i\": 1.0}' WHERE seq = 2",
                      "UPDATE audit_auditentry SET at = at + interval '1 second' WHERE seq = 2",
                      "UPDATE audit_auditentry SET seq = 20 WHERE seq = 2",
                      "UPDATE audit_auditentry SET reason = 'because' WHERE seq = 2",
                      # A key the hashed fields do not have, slipped into the payload.
                      "UPDATE audit_auditentry SET canonical = replace(canonical, "
                      "'\"actor\"', '\"x\":1,\"actor\"') WHERE seq = 2"):
        with pytest.raises(IntegrityError), transaction.atomic():
            sql(statement)
    assert AuditEntry.objects.get(seq=2).actor == "alice"
    assert verify_trail().ok


@pytest.fixture
def unlocked():
    """Fifteen entries under signed checkpoints, the triggers off, the constraint left alone."""
    with override_settings(AUDIT_CHECKPOINT_EVERY=4):
        record(15)
    sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    sql("ALTER TABLE audit_auditchainhead DISABLE TRIGGER USER")
    assert verify_trail().ok and binding.columns_bound()


@pytest.mark.django_db
@pytest.mark.parametrize(("tamper", "seq", "words"), [
    # The payload and its columns changed together (the constraint holds): the hash does not.
    (["UPDATE audit_auditentry SET actor = 'mallory', canonical = replace(canonical, "
      "'\"actor\":\"alice\"', '\"actor\":\"mallory\"') WHERE seq = 6"], 6,
     "does not match its hash"),
    (["DELETE FROM audit_auditentry WHERE seq = 9"], 9, "is missing"),
    (["DELETE FROM audit_auditentry WHERE seq >= 14"], 14, "truncated"),
    (["DELETE FROM audit_auditentry WHERE seq >= 10",
      "UPDATE audit_auditchainhead SET seq = 9, hash = "
      "(SELECT hash FROM audit_auditentry WHERE seq = 9)"], 10, "checkpoint"),
    # A row stored without its payload is rebuilt from its columns, which must then hash.
    (["UPDATE audit_auditentry SET reason = 'nothing to see', canonical = '' WHERE seq = 3"], 3,
     "does not match its hash"),
    (["UPDATE audit_auditentry SET prev_hash = repeat('a', 64), canonical = '' WHERE seq = 7"],
     7, "does not link"),
], ids=["payload-and-columns", "deleted", "cut-tail", "cut-tail-head-moved", "blanked-payload",
        "relinked"])
def test_tampering_with_the_constraint_in_place_is_caught_at_its_entry(unlocked, small_ranges,
                                                                       tamper, seq, words):
    for statement in tamper:
        sql(statement)
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, seq), report.problem
    assert words in report.problem.lower() or words in report.reason


@pytest.mark.django_db
def test_entries_stored_before_payloads_verify_from_their_columns(unlocked, small_ranges):
    sql("UPDATE audit_auditentry SET canonical = '' WHERE seq %% 2 = 0")
    assert binding.columns_bound()
    report = verify_trail()
    assert report.ok and report.count == 15


@pytest.mark.django_db
@pytest.mark.parametrize("undo", [
    f"ALTER TABLE audit_auditentry DROP CONSTRAINT {binding.CONSTRAINT}",
    # Dropped, the column edited, then put back unvalidated so the edited row stays.
    "NOT VALID",
    # Put back with a weaker expression under the same name.
    f"ALTER TABLE audit_auditentry DROP CONSTRAINT {binding.CONSTRAINT}; ALTER TABLE "
    f"audit_auditentry ADD CONSTRAINT {binding.CONSTRAINT} CHECK (canonical <> 'x')",
], ids=["dropped", "unvalidated", "weakened"])
def test_a_constraint_no_longer_in_force_means_every_row_is_checked_again(unlocked, undo):
    if undo == "NOT VALID":
        unbind_columns()
        sql("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 5")
        sql(f"ALTER TABLE audit_auditentry ADD CONSTRAINT {binding.CONSTRAINT} "
            f"CHECK ({binding.CHECK_SQL}) NOT VALID")
    else:
        for statement in undo.split("; "):
            sql(statement)
        sql("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 5")
    assert not binding.columns_bound()
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 5)
    assert "does not match its hash" in report.problem


@pytest.mark.django_db
def test_a_renamed_constraint_is_not_taken_on_trust(unlocked):
    sql(f"ALTER TABLE audit_auditentry RENAME CONSTRAINT {binding.CONSTRAINT} TO look_alike")
    assert not binding.columns_bound()
    assert verify_trail().ok  # every row's columns checked, and they hold


@pytest.mark.django_db
def test_migrating_a_database_with_an_edited_row_leaves_the_constraint_unvalidated(unlocked):
    unbind_columns()
    sql("UPDATE audit_auditentry SET target = 'user:nobody' WHERE seq = 4")
    with connection.cursor() as cursor:
        assert binding.add_constraint(cursor) is False
    assert not binding.columns_bound()
    assert verify_trail().first_broken_seq == 4


@pytest.mark.django_db(transaction=True)
def test_worker_processes_prove_the_committed_trail_and_name_a_deleted_entry(
        small_ranges, settings, monkeypatch):
    started = []
    start = verify._start_worker
    monkeypatch.setattr(verify, "_start_worker",
                        lambda *args: started.append(args) or start(*args))
    settings.AUDIT_CHECKPOINT_EVERY = 10
    for i in range(40):
        with transaction.atomic():
            record(1, start=i)
    settings.AUDIT_VERIFY_PROCESSES = 1
    alone = verify_trail()
    settings.AUDIT_VERIFY_PROCESSES = 2
    report = verify_trail()
    assert len(started) == 2  # both workers ran, each given every other range
    assert report.ok and (report.count, report.root) == (alone.count, alone.root) == (
        40, alone.root)
    assert report.checkpoints == AuditCheckpoint.objects.count() >= 4
    try:
        sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
        # Entries from before payloads were stored are rebuilt from their columns there too.
        sql("UPDATE audit_auditentry SET canonical = '' WHERE seq %% 3 = 0")
        assert verify_trail().root == alone.root and len(started) == 4
        sql("DELETE FROM audit_auditentry WHERE seq = 27")
        report = verify_trail()
        assert (report.ok, report.first_broken_seq) == (False, 27)
        assert "missing" in report.problem and len(started) == 6
    finally:
        sql("ALTER TABLE audit_auditentry ENABLE TRIGGER USER")


@pytest.mark.django_db
def test_a_database_with_the_per_field_constraint_upgrades_to_the_one_parse(unlocked):
    """Migration 0010 replaces the constraint that parsed the payload once per field; until it
    runs, the old one is not the expression this code defines, so verify checks every row."""
    from importlib import import_module

    upgrade = import_module("audit.migrations.0010_entry_binding_parsed_once")
    sql(f"ALTER TABLE audit_auditentry DROP CONSTRAINT {binding.CONSTRAINT}")
    sql(f"ALTER TABLE audit_auditentry ADD CONSTRAINT {binding.CONSTRAINT} "
        f"CHECK ({upgrade.OLD_CHECK_SQL})")
    assert not binding.columns_bound()
    assert verify_trail().ok
    editor = connection.schema_editor()
    upgrade.parsed_once(None, editor)
    assert binding.columns_bound()
    report = verify_trail()
    assert report.ok and report.count == 15
