"""The platform secrets an http connector may sign with: declared by admin configuration
(`CONNECTOR_SECRETS`), granted to owners by admin, never any environment variable by name."""

import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User

from registry.models import ConnectorSecretGrant


def declared(name: str) -> bool:
    """True when the admin's configuration lists `name` as a platform secret."""
    return name in settings.CONNECTOR_SECRETS


def granted(user: User, name: str) -> bool:
    """True when `name` is a declared platform secret granted to `user`."""
    return declared(name) and ConnectorSecretGrant.objects.filter(user=user, secret=name).exists()


def secret_value(name: str) -> str | None:
    """The secret's value: the variable `name`, else the file `NAME_FILE` names (None: unset)."""
    if not declared(name):
        return None
    value = os.environ.get(name, "").strip()
    path = os.environ.get(f"{name}_FILE", "").strip()
    if not value and path:
        try:
            value = Path(path).read_text().strip()
        except OSError:
            return None
    return value or None
