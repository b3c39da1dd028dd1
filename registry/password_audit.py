"""Every password change reaches the audit trail, whichever path made it (the admin's own
password form, `changepassword`, `createsuperuser`, a shell): Django calls each configured
password validator's `password_changed` after the new hash is saved, so that is the one place
no path can go around. (A model signal would not know a password changed.)"""

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from audit.context import current_request_id

# Set by code that knows who is changing the password, or that audits the change itself.
_changer: ContextVar[Any] = ContextVar("password_changer", default=None)
AUDITED_BY_CALLER = "audited-by-caller"


@contextmanager
def password_changed_by(actor: Any) -> Iterator[None]:
    """Run a block whose password changes are made by `actor` (or AUDITED_BY_CALLER)."""
    token = _changer.set(actor)
    try:
        yield
    finally:
        _changer.reset(token)


def command_line_actor() -> str:
    """Who ran a management command, as far as this machine knows."""
    return f"system:cli (OS user {getpass.getuser()})"


class AuditPasswordChanges:
    """A password 'validator' that validates nothing and audits every change."""

    def validate(self, password: str, user: Any = None) -> None:
        return None

    def get_help_text(self) -> str:
        return ""

    def password_changed(self, password: str, user: Any = None) -> None:
        actor = _changer.get()
        if actor == AUDITED_BY_CALLER or user is None or user.pk is None:
            return
        if actor is None:
            # In a request the only password forms are a person's own; outside one, a command.
            actor = user if current_request_id() else command_line_actor()
        from registry import actions  # cycle: registry.actions imports this module

        actions.record_password_change(user, actor=actor)
