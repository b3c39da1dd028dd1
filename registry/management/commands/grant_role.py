"""`manage.py grant_role USER ROLE [--create | --revoke]`."""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry import actions
from registry.choices import Role


class Command(BaseCommand):
    help = "Give a person a role (owner, approver, compliance, admin)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", choices=Role.values)
        parser.add_argument("--create", action="store_true",
                            help="create the account if missing and print its password")
        parser.add_argument("--revoke", action="store_true", help="take the role away instead")

    def handle(self, *args: Any, username: str, role: str, create: bool, revoke: bool,
               **options: Any) -> None:
        actor = "system:cli"
        user = User.objects.filter(username=username).first()
        if revoke:
            if user is None:
                raise CommandError(f"no user {username!r}")
            revoked = actions.revoke_role(user, role, actor=actor)
            self.stdout.write(f"{username}: {role} {'revoked' if revoked else 'not held'}")
            return
        if user is None:
            if not create:
                raise CommandError(f"no user {username!r}; pass --create to create it")
            user, password = actions.create_person(username, actor=actor)
            self.stdout.write(f"created {username} with password {password}")
        granted = actions.grant_role(user, role, actor=actor)
        if role == Role.ADMIN:  # the Django admin and the RQ dashboard need the flags
            actions.set_account_flags(user, actor=actor, is_staff=True, is_superuser=True,
                                      reason="admin role granted")
        self.stdout.write(f"{username}: {role} {'granted' if granted else 'already held'}")
