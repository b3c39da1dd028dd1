"""`manage.py api_token USER [--agent NAME]`: print a new token for `Authorization: Token <key>`.

With --agent the token acts as that agent only (USER must own it, or be an admin)."""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import NotAllowed
from registry import actions
from registry.models import Agent


class Command(BaseCommand):
    help = "Issue an API token for a person and print it (shown once, stored hashed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")
        parser.add_argument("--agent", default=None, help="scope the token to this agent")
        parser.add_argument("--expires-in-days", type=int, default=None)

    def handle(self, *args: Any, username: str, name: str, expires_in_days: int | None,
               agent: str | None, **options: Any) -> None:
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        if expires_in_days is not None and expires_in_days < 1:
            raise CommandError("--expires-in-days must be at least 1")
        if agent is not None:
            target = Agent.objects.filter(name=agent).first()
            if target is None:
                raise CommandError(f"no agent {agent!r}")
            try:
                _, key = actions.issue_agent_token(target, actor=user, name=name,
                                                   expires_in_days=expires_in_days)
            except NotAllowed as error:
                raise CommandError(error.message) from None
        else:
            _, key = actions.issue_api_token(user, actor="system:cli", name=name,
                                             expires_in_days=expires_in_days)
        self.stdout.write(key)
