"""Granting platform secrets to owners (admin only); each grant and revocation is audited."""

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

import audit
from audit.choices import AuditAction
from config.errors import Invalid, NotAllowed
from registry.choices import Role
from registry.connector_secrets import declared
from registry.models import ConnectorSecretGrant
from registry.roles import has_role


def _check_admin(actor: Any) -> None:
    # Commands act as "system:cli" (whoever runs manage.py operates the control plane).
    if isinstance(actor, str) and actor.startswith("system:"):
        return
    if not has_role(actor, Role.ADMIN):
        raise NotAllowed("Only admins grant connector secrets.")


@transaction.atomic
def grant_connector_secret(secret: str, user: User, *, actor: Any) -> bool:
    """Let `user`'s agents sign with a declared platform secret; False when already granted."""
    _check_admin(actor)
    if not declared(secret):
        raise Invalid(f"{secret!r} is not in CONNECTOR_SECRETS", details=[
            {"pointer": "/secret", "message": "expected a secret CONNECTOR_SECRETS declares"}])
    label = actor if isinstance(actor, str) else actor.username
    _, created = ConnectorSecretGrant.objects.get_or_create(
        secret=secret, user=user, defaults={"granted_by": label})
    if created:
        audit.record(actor=actor, action=AuditAction.CONNECTOR_SECRET_GRANTED,
                     target=f"user:{user.username}", after={"connector_secret": secret})
    return created


@transaction.atomic
def revoke_connector_secret(secret: str, user: User, *, actor: Any) -> bool:
    """Withdraw a grant; the user's agents naming it fail to reach their platform from now."""
    _check_admin(actor)
    deleted, _ = ConnectorSecretGrant.objects.filter(secret=secret, user=user).delete()
    if deleted:
        audit.record(actor=actor, action=AuditAction.CONNECTOR_SECRET_REVOKED,
                     target=f"user:{user.username}", before={"connector_secret": secret})
    return bool(deleted)
