"""Several processes appending at once never fork or break the chain."""

import subprocess
import sys

import pytest
from django.db import connection
from django.test import override_settings

import audit
from audit.choices import AuditAction
from audit.jobs import sequence
from audit.models import AuditCheckpoint, AuditEntry
from audit.verify import verify_trail
from tests.conftest import ROOT, child_env

WORKER = ROOT / "bench" / "audit_writer.py"


@override_settings(AUDIT_CHECKPOINT_EVERY=50)
def test_eight_concurrent_writer_processes_leave_one_unbroken_chain(transactional_db):
    writers, each = 8, 40
    processes = [
        subprocess.Popen([sys.executable, str(WORKER), f"w{n}", str(each)], cwd=ROOT,
                         env=child_env(AUDIT_CHECKPOINT_EVERY="50"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
        for n in range(writers)
    ]
    for process in processes:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err.decode()
    # What a commit after its holder's last read of the queue left queued, the workers'
    # sequencer places (no worker runs here: its job, as rqcron runs it).
    sequence()
    report = verify_trail()
    assert report.ok, report.problem
    assert report.count == writers * each
    # Every writer's entries are all there, in its own order.
    for n in range(writers):
        mine = AuditEntry.objects.filter(actor=f"system:w{n}")
        targets = list(mine.values_list("target", flat=True))
        assert targets == [f"w{n}:{i}" for i in range(each)]
    assert list(AuditCheckpoint.objects.values_list("seq", flat=True)) == list(range(50, 321, 50))
    assert report.checkpoints == 6


def test_an_entry_appended_while_the_trail_is_walked_is_no_break(db):
    """Another process appends between the walk and the head read (here on the same
    connection, at exactly that moment): the trail is whole, before and after."""
    for i in range(3):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    state = {"walked": False, "appended": False}

    def append_once_the_walk_is_done(execute, sql, params, many, context):
        if "audit_auditentry" in sql and "ORDER BY" in sql:
            state["walked"] = True
        elif "audit_auditchainhead" in sql and state["walked"] and not state["appended"]:
            state["appended"] = True
            audit.record(actor="bob", action=AuditAction.ROLE_GRANTED, target="user:late")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(append_once_the_walk_is_done):
        report = verify_trail()
    assert state["appended"]
    assert report.ok, report.problem
    assert report.count == 3
    assert verify_trail().count == 4


@pytest.fixture(autouse=True)
def _never_on_memory_db(settings):
    assert "memory" not in str(settings.DATABASES["default"]["NAME"])
