"""`manage.py seed_demo`: the demo personas, with random passwords kept under var/."""

import json
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.private_files import write_private
from registry import actions
from registry.choices import Role
from registry.password_changer import password_changed_by
from sandbox.demo import seed_cluster, seed_history

PERSONAS = [
    ("alice", Role.OWNER, "owns agents and proposes their desired state"),
    ("bob", Role.APPROVER, "approves changes and handles escalations"),
    ("carol", Role.APPROVER, "the second approver (four-eyes)"),
    ("dana", Role.COMPLIANCE, "watches drift, guardrails and the audit trail"),
    ("erin", Role.OWNER, "owns the support agents"),
    ("frank", Role.OWNER, "owns the sales agents"),
    ("admin", Role.ADMIN, "operates the control plane"),
]


class Command(BaseCommand):
    help = "Create the demo personas (DEBUG only) and print their logins."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="allow with DEBUG off")

    def handle(self, *args: Any, force: bool, **options: Any) -> None:
        if not settings.DEBUG and not force:
            raise CommandError("seed_demo creates known accounts; refusing with DEBUG off")
        store = settings.VAR_DIR / "demo-logins.json"
        logins: dict[str, str] = json.loads(store.read_text()) if store.exists() else {}
        for username, role, _ in PERSONAS:
            password = logins.get(username) or secrets.token_urlsafe(9)
            user = User.objects.filter(username=username).first()
            if user is None:
                user, _ = actions.create_person(username, actor="system:demo", password=password)
            elif not user.check_password(password):
                with password_changed_by("system:demo"):
                    user.set_password(password)
                    user.save(update_fields=["password"])
            if role == Role.ADMIN:
                actions.set_account_flags(user, actor="system:demo", is_staff=True,
                                          is_superuser=True, reason="admin role granted")
            actions.grant_role(user, role, actor="system:demo")
            logins[username] = password
        write_private(store, json.dumps(logins, indent=2))
        created = seed_cluster()
        if seed_history():
            self.stderr.write("seeded history: converged, corrected, escalated, proposed")
        width = max(len(name) for name, _, _ in PERSONAS)
        for username, role, what in PERSONAS:
            password = logins[username]
            self.stdout.write(f"  {username:<{width}}  {password:<14} {role.value:<10} {what}")
        if created:
            self.stderr.write(f"registered and approved {len(created)} demo agents")
