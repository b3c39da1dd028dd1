"""`manage.py api_token USER`: print a new token usable as `Authorization: Token <key>`."""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry import actions


class Command(BaseCommand):
    help = "Issue an API token for a person and print it (shown once, stored hashed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")
        parser.add_argument("--expires-in-days", type=int, default=None)

    def handle(self, *args: Any, username: str, name: str, expires_in_days: int | None,
               **options: Any) -> None:
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        if expires_in_days is not None and expires_in_days < 1:
            raise CommandError("--expires-in-days must be at least 1")
        _, key = actions.issue_api_token(user, actor="system:cli", name=name,
                                         expires_in_days=expires_in_days)
        self.stdout.write(key)
