"""Django's `createsuperuser`, with the new account (an admin: it holds every role) in the
audit trail, in the same transaction as the account itself."""

from typing import Any

from django.contrib.auth.management.commands import createsuperuser
from django.contrib.auth.models import User
from django.db import transaction

from registry import actions
from registry.password_changer import command_line_actor, password_changed_by


class Command(createsuperuser.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        actor = command_line_actor()
        with transaction.atomic(), password_changed_by(actor):
            known = set(User.objects.values_list("pk", flat=True))
            super().handle(*args, **options)
            for user in User.objects.exclude(pk__in=known):
                actions.record_account_created(user, actor=actor)
