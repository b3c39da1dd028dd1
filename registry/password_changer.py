"""Who is changing a password, for its audit entry (registry/password_audit.py): set by code
that knows (an action, a command), or AUDITED_BY_CALLER by code that audits the change itself."""

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

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


def current_changer() -> Any:
    """The actor set by the innermost `password_changed_by`, or None."""
    return _changer.get()


def command_line_actor() -> str:
    """Who ran a management command, as far as this machine knows."""
    return f"system:cli (OS user {getpass.getuser()})"
