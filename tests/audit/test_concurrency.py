"""Several processes appending at once never fork or break the chain."""

import subprocess
import sys

import pytest
from django.test import override_settings

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


@pytest.fixture(autouse=True)
def _never_on_memory_db(settings):
    assert "memory" not in str(settings.DATABASES["default"]["NAME"])
