"""The default sequencer (AUDIT_SEQUENCER=writers): a writer that finds the head free places its
entry at once; one that finds it taken queues its entry without waiting, and the holder places it
after the holder commits. Two real database connections here."""

import threading

import pytest
from django.db import connection, transaction

import audit
from audit.actions import checkpoint_head
from audit.choices import AuditAction
from audit.models import AuditEntry, AuditPendingEntry
from audit.verify import verify_trail
from tests.conftest import eventually

pytestmark = pytest.mark.skipif("connection.vendor != 'postgresql'",
                                reason="SQLite has one writer at a time: the lock is never taken")


@pytest.fixture
def trail(transactional_db):
    """A trail with its first entry committed."""
    write("start")


def write(target: str):
    return audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=target)


class Holder(threading.Thread):
    """Another process's transaction holding the placing lock until told to commit: a writer
    (whose own entry took it) or a job that locks the head (a checkpoint)."""

    def __init__(self, job=None) -> None:
        super().__init__(daemon=True)
        self.job, self.holding, self.release = job, threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.job() if self.job else write("held")
                self.holding.set()
                self.release.wait(60)
        finally:
            connection.close()


def elsewhere(function):
    """Run `function` on its own connection; its result, or None if it did not finish within
    30 s (it waited on the head)."""
    result: list = []

    def run() -> None:
        try:
            result.append(function())
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    return result[0] if result else None


def test_a_lone_writer_sees_its_entry_placed_in_its_own_transaction(transactional_db):
    with transaction.atomic():
        entry = write("lone")
        assert entry.seq and AuditEntry.objects.get(seq=entry.seq).target == "lone"
    assert not AuditPendingEntry.objects.exists()
    assert verify_trail().ok


def test_a_writer_never_waits_on_a_held_head_and_the_holder_places_its_entry(trail):
    holder = Holder()
    holder.start()
    assert holder.holding.wait(30)

    def queue_one():
        with transaction.atomic():
            return write("queued")

    queued = elsewhere(queue_one)
    assert queued is not None, "the writer waited for the head"
    assert queued.seq is None and AuditPendingEntry.objects.filter(id=queued.id).exists()
    report = verify_trail()
    assert report.ok and report.pending == 1  # shown as pending, not hidden
    holder.release.set()
    holder.join(30)
    # The holder's commit placed what queued behind it: no worker runs in this test.
    eventually(lambda: not AuditPendingEntry.objects.exists(), timeout=30,
               message="the head's holder did not place the queued entry")
    targets = list(AuditEntry.objects.order_by("seq").values_list("target", flat=True))
    assert targets[-2:] == ["held", "queued"]
    report = verify_trail()
    assert report.ok and report.pending == 0


def test_one_transactions_entries_keep_their_order_across_a_held_head(trail):
    holder = Holder()
    holder.start()
    assert holder.holding.wait(30)

    def queue_then_place():
        with transaction.atomic():
            first = write("first")  # the head is taken: queued
            holder.release.set()
            holder.join(30)
            second = write("second")  # the head is free: placed, with first before it
            return first, second

    first, second = elsewhere(queue_then_place)
    assert first.seq is None and second.seq is not None
    targets = list(AuditEntry.objects.order_by("seq").values_list("target", flat=True))
    assert targets[-3:] == ["held", "first", "second"]
    assert not AuditPendingEntry.objects.exists() and verify_trail().ok


def test_an_entry_queued_behind_a_checkpoint_is_placed_when_the_checkpoint_commits(trail):
    holder = Holder(job=checkpoint_head)  # the periodic checkpoint: it places nothing itself
    holder.start()
    assert holder.holding.wait(30)

    def queue_one():
        with transaction.atomic():
            return write("behind-a-checkpoint")

    queued = elsewhere(queue_one)
    assert queued is not None and queued.seq is None
    assert AuditPendingEntry.objects.filter(id=queued.id).exists()
    holder.release.set()
    holder.join(30)
    eventually(lambda: AuditEntry.objects.filter(target="behind-a-checkpoint").exists(),
               timeout=30, message="the checkpoint's commit did not place the queued entry")
    report = verify_trail()
    assert report.ok and report.pending == 0
