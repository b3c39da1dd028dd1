"""Retention on SQLite (the zero-set-up default): the tables stay plain and expired rows go in
bounded batches, each batch with its audit entry; an agent's latest observation stays."""

import json
import subprocess
import sys

from django.conf import settings

from tests.conftest import ROOT

SCRIPT = """
import json
from datetime import timedelta
from django.utils import timezone
from audit.models import AuditEntry
from audit.verify import verify_trail
from reconciliation.actions.retention import apply_retention, partitioned
from reconciliation.models import AlertEvent, ObservedState
from runtime.models import BehaviourEvent, UnregisteredAgent

now = timezone.now()
old = now - timedelta(days=120)
for i in range(5):
    AlertEvent.objects.create(at=old + timedelta(minutes=i), event="drift.detected")
fresh = AlertEvent.objects.create(at=now, event="drift.detected")
for i in range(3):
    BehaviourEvent.objects.create(event_id=f"e{i}", agent_name="ghost", ts=old, kind="tool_call")
quiet = UnregisteredAgent.objects.create(name="quiet")
chatty = UnregisteredAgent.objects.create(name="chatty")
def observe(who, at):
    return ObservedState.objects.create(unregistered=who, state={}, state_sha256="x",
                                        source="push", reported_by="t", observed_at=at).pk
only = observe(quiet, old)
superseded, current = observe(chatty, old), observe(chatty, now)
gone = apply_retention(now=now)
entries = [e.before for e in AuditEntry.objects.filter(action="retention.rows_deleted")
           .order_by("seq")]
print(json.dumps({
    "partitioned": partitioned(), "gone": gone, "entries": entries,
    "alerts": list(AlertEvent.objects.values_list("pk", flat=True)), "fresh": fresh.pk,
    "events": BehaviourEvent.objects.count(),
    "observations": sorted(ObservedState.objects.values_list("pk", flat=True)),
    "kept": sorted([only, current]), "verified": verify_trail().ok}))
"""


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)


def test_sqlite_deletes_expired_rows_in_bounded_batches_each_audited(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "VAR_DIR": str(tmp_path), "PYTHONPATH": str(ROOT),
           "REDIS_URL": settings.REDIS_URL, "RETENTION_DELETE_BATCH": "2"}
    migrated = manage(env, "migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    result = manage(env, "shell", "-c", SCRIPT)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])

    assert report["partitioned"] is False
    assert report["gone"] == {"events": 3, "observations": 1, "runs": 0, "alerts": 5}
    assert report["alerts"] == [report["fresh"]] and report["events"] == 0
    assert report["observations"] == report["kept"]  # quiet's only one, chatty's latest
    # Batches of at most 2, oldest first, one audit entry each: the loop's kinds, then the
    # events runtime registered.
    assert [(e["kind"], e["rows"]) for e in report["entries"]] == [
        ("observations", 1), ("alerts", 2), ("alerts", 2), ("alerts", 1), ("events", 2),
        ("events", 1)]
    assert report["verified"]
