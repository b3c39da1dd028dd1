"""`manage.py set_active USER yes|no [--reason TEXT]`: let a person sign in and use their
tokens, or stop them at once (sessions and tokens included). Audited."""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry import actions
from registry.password_changer import command_line_actor


class Command(BaseCommand):
    help = "Activate or deactivate a person's account (audited)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("active", choices=["yes", "no"])
        parser.add_argument("--reason", default="", help="why, for the audit trail")

    def handle(self, *args: Any, username: str, active: str, reason: str,
               **options: Any) -> None:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        changed = actions.set_account_flags(user, actor=command_line_actor(), reason=reason,
                                            is_active=active == "yes")
        state = "active" if active == "yes" else "inactive"
        self.stdout.write(f"{username}: {state}" + ("" if changed else " already"))
