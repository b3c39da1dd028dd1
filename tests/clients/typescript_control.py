"""What the TypeScript suite asks of the control plane's operators, run as its own process on
the test database (the suite runs in Node and cannot call Django): `suspend AGENT`."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def main(argv: list[str]) -> int:
    import django

    django.setup()
    from django.db import transaction

    from reconciliation.actions import suspend_agent
    from registry.models import Agent

    command, name = argv
    if command != "suspend":
        print(f"unknown command {command}", file=sys.stderr)
        return 2
    with transaction.atomic():
        suspend_agent(Agent.objects.get(name=name), actor="system:test",
                      reason="suspended by the TypeScript suite")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
