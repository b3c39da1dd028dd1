"""`manage.py lab drift|crash|fail|lag NAME` and `manage.py lab mass N`: the drift lab."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import DomainError
from registry.models import Agent
from sandbox.lab import inject, mass_drift


class Command(BaseCommand):
    help = "Inject drift or faults into sandbox agents and watch the loop handle them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["drift", "crash", "fail", "lag", "mass"])
        parser.add_argument("target", help="agent name, or how many agents for `mass`")
        parser.add_argument("--after", type=int, default=1, help="changes before the fault")
        parser.add_argument("--seconds", type=int, default=20, help="read lag for `lag`")

    def handle(self, *args: Any, what: str, target: str, after: int, seconds: int,
               **options: Any) -> None:
        actor = "system:drift-lab"
        try:
            if what == "mass":
                for line in mass_drift(int(target), actor=actor):
                    self.stdout.write(line)
                return
            agent = Agent.objects.select_related("active_version").filter(name=target).first()
            if agent is None:
                raise CommandError(f"no agent {target!r}")
            self.stdout.write(inject(agent, what, actor=actor, after_changes=after,
                                     lag_seconds=seconds))
        except DomainError as error:
            raise CommandError(error.message) from None
        except ValueError:
            raise CommandError("`mass` takes a number of agents") from None
