"""A separate process that appends audit entries, as a web process or worker would."""

import sys

import django

django.setup()

from django.db import transaction  # noqa: E402

import audit  # noqa: E402
from audit.choices import AuditAction  # noqa: E402


def main(name: str, count: int) -> None:
    for i in range(count):
        with transaction.atomic():
            audit.record(actor=f"system:{name}", action=AuditAction.ROLE_GRANTED,
                         target=f"{name}:{i}", after={"writer": name, "i": i})


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
