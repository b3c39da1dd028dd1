"""Every password change reaches the audit trail, whichever path made it (the admin's own
password form, `changepassword`, `createsuperuser`, a shell): Django calls each configured
password validator's `password_changed` after the new hash is saved, so that is the one place
no path can go around. (A model signal would not know a password changed.) Who changed it comes
from registry/password_changer.py."""

from typing import Any

from audit.context import current_request_id
from registry.actions.people import record_password_change
from registry.password_changer import AUDITED_BY_CALLER, command_line_actor, current_changer


class AuditPasswordChanges:
    """A password 'validator' that validates nothing and audits every change."""

    def validate(self, password: str, user: Any = None) -> None:
        return None

    def get_help_text(self) -> str:
        return ""

    def password_changed(self, password: str, user: Any = None) -> None:
        actor = current_changer()
        if actor == AUDITED_BY_CALLER or user is None or user.pk is None:
            return
        if actor is None:
            # In a request the only password forms are a person's own; outside one, a command.
            actor = user if current_request_id() else command_line_actor()
        record_password_change(user, actor=actor)
