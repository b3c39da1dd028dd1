"""A separate process appending audit entries, as a web process or worker would.

Used by bench/audit_append.py and by the concurrency test:
    python bench/audit_writer.py NAME COUNT          # audit.record, one transaction each
    python bench/audit_writer.py NAME COUNT bare     # the floor: a bare single-row INSERT, then
                                                     # COMMIT, of the same row shape, no model
"""

import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

import audit  # noqa: E402
from audit.choices import AuditAction  # noqa: E402

BARE = ("INSERT INTO audit_auditpendingentry (at, actor, action, target, agent, before, after, "
        "reason, request_id) VALUES (%s, %s, %s, %s, %s, {json}, {json}, %s, %s)")


def bare(name: str, count: int) -> None:
    statement = BARE.format(json="%s::jsonb" if connection.vendor == "postgresql" else "%s")
    with connection.cursor() as cursor:
        for i in range(count):
            with transaction.atomic():  # BEGIN, the INSERT, COMMIT: one row per transaction
                cursor.execute(statement, [timezone.now(), f"system:{name}", "role.granted",
                                           f"{name}:{i}", "", "null",
                                           json.dumps({"writer": name, "i": i}), "", ""])


def backend_cpu() -> float | None:
    """CPU seconds this process's PostgreSQL backend has used, when the server runs on this
    machine (its /proc entry is readable); None otherwise."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(name: str, count: int, mode: str) -> None:
    backend_before, cpu_before = backend_cpu(), own_cpu()
    started = time.time()
    if mode == "bare":
        bare(name, count)
    else:
        for i in range(count):
            with transaction.atomic():
                audit.record(actor=f"system:{name}", action=AuditAction.ROLE_GRANTED,
                             target=f"{name}:{i}", after={"writer": name, "i": i})
    finished, cpu = time.time(), own_cpu() - cpu_before
    backend = backend_cpu()
    # The bench times the appends themselves, not interpreter and Django start-up; CPU used
    # (this process's, and its PostgreSQL backend's) is steadier than time on a shared machine.
    print(json.dumps({"writer": name, "started": started, "finished": finished, "cpu": cpu,
                      "backend_cpu": None if backend is None else backend - backend_before}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "record")
