"""`manage.py reset_two_factor USER [--reason TEXT]`: remove a person's authenticator (lost, or
enrolled by someone holding their session) so they enrol again. Audited."""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry.actions.stepup import reset_authenticator
from registry.password_changer import command_line_actor


class Command(BaseCommand):
    help = "Remove a person's step-up authenticator (audited)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--reason", default="", help="why, for the audit trail")

    def handle(self, *args: Any, username: str, reason: str, **options: Any) -> None:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        removed = reset_authenticator(user, actor=command_line_actor(), reason=reason)
        self.stdout.write(f"{username}: {removed} authenticator(s) removed")
