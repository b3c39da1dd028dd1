"""The default sequencer (AUDIT_SEQUENCER=writers): a writer that finds the head free places its
entry at once; one that finds it taken queues its entry without waiting, and the holder places it
after the holder commits (or, if the writer commits after the holder's last read of the queue,
the next holder, or the workers' sequencer). Two real database connections here."""

import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

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


def commit_after_the_holder_released() -> list[str]:
    """A writer queues behind a holder and commits only after the holder has committed,
    released and read the queue (finding nothing): the race no holder's read can close. The
    statements the late writer ran."""
    holder = Holder()
    holder.start()
    assert holder.holding.wait(30)
    queued, commit = threading.Event(), threading.Event()
    statements: list[str] = []

    def queue_commit_late() -> None:
        try:
            with CaptureQueriesContext(connection) as captured:
                with transaction.atomic():
                    write("late")
                    queued.set()
                    assert commit.wait(60)
            statements.extend(q["sql"] for q in captured.captured_queries)
        finally:
            connection.close()

    writer = threading.Thread(target=queue_commit_late, daemon=True)
    writer.start()
    assert queued.wait(30)
    holder.release.set()
    holder.join(30)  # committed, released, read the queue: the late entry was not there yet
    commit.set()
    writer.join(30)
    return statements


def test_an_entry_committed_after_its_holder_released_is_placed_first_by_the_next_writer(trail):
    """The late entry is shown pending, never hidden, and the next writer to hold the lock
    places it before its own entry, in commit order. The late writer ran no look-up of its own
    after its commit (the round trip that made every queued append cost a third more)."""
    statements = commit_after_the_holder_released()
    assert not any("pg_try_advisory_lock(" in sql for sql in statements)
    report = verify_trail()
    assert report.ok and report.pending == 1
    assert list(AuditPendingEntry.objects.values_list("target", flat=True)) == ["late"]
    write("next")
    targets = list(AuditEntry.objects.order_by("seq").values_list("target", flat=True))
    assert targets[-3:] == ["held", "late", "next"]
    report = verify_trail()
    assert report.ok and report.pending == 0


def test_an_entry_committed_after_its_holder_released_is_placed_by_the_workers_sequencer(trail):
    """With no writer after it, the workers' sequencer (the job rqcron runs every
    AUDIT_SEQUENCE_DELAY_SECONDS) places it."""
    from audit.jobs import sequence

    commit_after_the_holder_released()
    assert AuditPendingEntry.objects.count() == 1
    assert sequence() == 1
    assert AuditEntry.objects.order_by("seq").last().target == "late"
    report = verify_trail()
    assert report.ok and report.pending == 0
