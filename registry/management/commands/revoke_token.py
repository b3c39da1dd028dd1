"""`manage.py revoke_token PREFIX [--reason TEXT]`, or `--list [--user USER]` to find one."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry import actions
from registry.models import ApiToken

ACTOR = "system:cli"


class Command(BaseCommand):
    help = "Revoke an API token by the prefix `api_token` printed; later requests with it get 401."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", nargs="?", help="the token's first 8 characters")
        parser.add_argument("--reason", default="", help="why, for the audit trail")
        parser.add_argument("--list", action="store_true", help="list tokens instead")
        parser.add_argument("--user", default=None,
                            help="with --list: the tokens this person holds or whose agents "
                                 "they own")

    def handle(self, *args: Any, prefix: str | None, reason: str, list: bool,
               user: str | None, **options: Any) -> None:
        if list:
            tokens = actions.visible_tokens(ACTOR)
            if user:
                tokens = [t for t in tokens if user in (
                    t.user.username, t.agent.owner.username if t.agent_id else None)]
            for t in tokens:
                acts_as = f"agent {t.agent.name}" if t.agent_id else "person"
                self.stdout.write(f"{t.key_prefix}  {t.status:9}  holder {t.user.username}  "
                                  f"{acts_as}  {t.name}")
            return
        if not prefix:
            raise CommandError("name the token's prefix, or pass --list")
        matches = ApiToken.objects.filter(key_prefix=prefix)
        if matches.count() != 1:
            raise CommandError(f"{matches.count()} tokens start with {prefix!r}; "
                               "nothing was revoked" if matches.count() else
                               f"no token {prefix!r}")
        token = actions.revoke_api_token(matches.get(), actor=ACTOR, reason=reason)
        self.stdout.write(f"revoked {token.key_prefix} (holder {token.user.username})")
