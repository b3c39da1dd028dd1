"""A separate process appending audit entries, as a web process or worker would.

Used by bench/audit_append.py and by the concurrency test: python bench/audit_writer.py NAME COUNT
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from django.db import transaction  # noqa: E402

import audit  # noqa: E402
from audit.choices import AuditAction  # noqa: E402


def main(name: str, count: int) -> None:
    started = time.time()
    for i in range(count):
        with transaction.atomic():
            audit.record(actor=f"system:{name}", action=AuditAction.ROLE_GRANTED,
                         target=f"{name}:{i}", after={"writer": name, "i": i})
    # The bench times the appends themselves, not interpreter and Django start-up.
    print(json.dumps({"writer": name, "started": started, "finished": time.time()}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
