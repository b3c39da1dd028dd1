"""The sequencer (AUDIT_SEQUENCER=workers): writers only queue entries, a real RQ worker gives
them their place in the log in batches, a worker killed mid-batch loses nothing and places
nothing twice, and verify shows queued entries as pending."""

import re

import django_rq
import pytest
from django.test import Client
from django.utils import timezone
from rq.registry import StartedJobRegistry

import audit
from audit.choices import AuditAction
from audit.models import AuditEntry, AuditPendingEntry
from audit.sequencing import FLAG
from audit.verify import verify_trail
from tests.conftest import eventually

BATCH = 5000


@pytest.fixture
def queued(settings):
    settings.AUDIT_SEQUENCER = "workers"
    settings.AUDIT_CHECKPOINT_EVERY = 1000


def write(n: int, prefix: str = "u") -> list:
    return [audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"{prefix}:{i}")
            for i in range(n)]


def test_queued_entries_are_pending_until_a_worker_places_them(queued, people, api_as,
                                                                start_worker):
    dana = api_as(people.dana)
    before = AuditEntry.objects.count()
    written = write(5)
    assert all(entry.seq is None and entry.hash is None for entry in written)
    report = dana.get("/api/v1/audit/verify").json()
    assert report["ok"] and report["pending"] >= 5 and report["count"] == before
    page = Client()
    page.force_login(people.dana)
    shown = re.search(r"(\d+) newer entries are pending", page.get("/audit/").content.decode())
    assert shown and int(shown.group(1)) >= report["pending"]
    start_worker("default", AUDIT_SEQUENCER="workers")
    django_rq.get_queue("default").enqueue("audit.jobs.sequence")
    eventually(lambda: not AuditPendingEntry.objects.exists(), timeout=60,
               message="the worker did not sequence the queued entries")
    report = dana.get("/api/v1/audit/verify").json()
    assert report["ok"] and report["pending"] == 0
    targets = list(AuditEntry.objects.filter(target__startswith="u:").order_by("seq")
                   .values_list("target", flat=True))
    assert targets == [f"u:{i}" for i in range(5)]


def test_a_committed_entry_reaches_the_log_without_anyone_asking(queued, start_worker,
                                                                  redis_client):
    start_worker("default", AUDIT_SEQUENCER="workers")
    django_rq.get_connection("default").delete(FLAG)
    write(3)
    eventually(lambda: AuditEntry.objects.filter(target__startswith="u:").count() == 3,
               timeout=60, message="entries were not sequenced after their commit")
    assert verify_trail().ok


def test_a_sequencer_killed_mid_batch_loses_nothing_and_places_nothing_twice(
        queued, start_worker, redis_client):
    total = 3 * BATCH
    AuditPendingEntry.objects.bulk_create(
        AuditPendingEntry(at=timezone.now(), actor="alice", action="role.granted",
                          target=f"k:{i}") for i in range(total))
    queue = django_rq.get_queue("default")
    worker = start_worker("default", AUDIT_SEQUENCER="workers")
    queue.enqueue("audit.jobs.sequence", job_timeout=600)
    # The first batch is in; the worker is inside the next one's transaction.
    eventually(lambda: AuditEntry.objects.filter(target__startswith="k:").exists(), timeout=120,
               interval=0.05, message="the sequencer never committed a batch")
    worker.kill()
    placed = AuditEntry.objects.filter(target__startswith="k:").count()
    assert placed < total, "the kill came too late to land mid-batch"
    assert placed % BATCH == 0  # whole batches only: the killed one rolled back entirely
    assert placed + AuditPendingEntry.objects.count() == total
    assert verify_trail().ok

    StartedJobRegistry(queue=queue).cleanup()
    start_worker("default", AUDIT_SEQUENCER="workers")
    queue.enqueue("audit.jobs.sequence", job_timeout=600)
    eventually(lambda: not AuditPendingEntry.objects.exists(), timeout=180,
               message="the restarted worker did not finish the queue")
    targets = list(AuditEntry.objects.filter(target__startswith="k:")
                   .values_list("target", flat=True))
    assert sorted(targets) == sorted(f"k:{i}" for i in range(total))  # each once, none lost
    report = verify_trail()
    assert report.ok and report.pending == 0, report.problem
