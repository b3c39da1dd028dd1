"""`manage.py connector_secret grant|revoke SECRET USER` and `connector_secret list`."""

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import DomainError
from registry import actions
from registry.connector_secrets import secret_value
from registry.models import ConnectorSecretGrant


class Command(BaseCommand):
    help = "Grant or revoke a platform secret (CONNECTOR_SECRETS) to an owner, or list grants."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verb", choices=("grant", "revoke", "list"))
        parser.add_argument("secret", nargs="?")
        parser.add_argument("username", nargs="?")

    def handle(self, *args: Any, verb: str, secret: str | None, username: str | None,
               **options: Any) -> None:
        if verb == "list":
            for name in settings.CONNECTOR_SECRETS:
                holders = sorted(ConnectorSecretGrant.objects.filter(secret=name)
                                 .values_list("user__username", flat=True))
                state = "set" if secret_value(name) else "NOT SET"
                self.stdout.write(f"{name} ({state}): {', '.join(holders) or 'nobody'}")
            return
        if not secret or not username:
            raise CommandError(f"usage: connector_secret {verb} SECRET USER")
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        change = (actions.grant_connector_secret if verb == "grant"
                  else actions.revoke_connector_secret)
        try:
            changed = change(secret, user, actor="system:cli")
        except DomainError as error:
            raise CommandError(error.message) from None
        done = {"grant": ("granted", "already granted"), "revoke": ("revoked", "not granted")}
        self.stdout.write(f"{secret} → {username}: {done[verb][0 if changed else 1]}")
