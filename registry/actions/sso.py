"""Single sign-on: the person an identity provider vouches for, and the roles its groups grant."""

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from registry.actions.people import grant_role, record_account_created, revoke_role
from registry.choices import Role
from registry.models import SingleSignOnIdentity

_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]")


def roles_for_groups(groups: Iterable[str], role_map: Mapping[str, str]) -> set[Role]:
    """The roles the provider's groups map to; groups the map does not name grant nothing."""
    return {Role(role_map[group]) for group in groups if group in role_map}


def _free_username(claims: Mapping[str, Any], subject: str) -> str:
    """The provider's preferred username when no account holds it; otherwise one made unique
    with the subject's hash, so a local 'alice' is never the account an SSO 'alice' signs in to."""
    wanted = str(claims.get("preferred_username") or str(claims.get("email", "")).split("@")[0])
    base = _NOT_IN_USERNAME.sub("", wanted)[:100] or "sso"
    if not User.objects.filter(username__iexact=base).exists():
        return base
    suffix = hashlib.sha256(subject.encode()).hexdigest()
    for length in (8, 16, 64):
        candidate = f"{base}.sso-{suffix[:length]}"
        if not User.objects.filter(username__iexact=candidate).exists():
            return candidate
    raise ValueError("no free username for this subject")


@transaction.atomic
def sign_in_from_provider(claims: Mapping[str, Any], *, issuer: str, groups_claim: str,
                          role_map: Mapping[str, str]) -> User:
    """The account of the provider's subject (made at its first sign-in), its roles set to what
    its groups map to now: each grant and each revocation audited."""
    subject = str(claims["sub"])
    actor = f"sso:{issuer}"
    identity = (SingleSignOnIdentity.objects.select_for_update(no_key=True, of=("self",))
                .select_related("user")
                .filter(issuer=issuer, subject=subject).first())
    if identity is None:
        user = User.objects.create_user(username=_free_username(claims, subject),
                                        email=str(claims.get("email", ""))[:254])
        user.set_unusable_password()  # signs in through the provider only
        user.save(update_fields=["password"])
        record_account_created(user, actor=actor)
        identity = SingleSignOnIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    else:
        identity.last_signed_in_at = timezone.now()
        identity.save(update_fields=["last_signed_in_at"])
    user = identity.user
    groups = claims.get(groups_claim) or []
    if isinstance(groups, str):
        groups = [groups]
    wanted = roles_for_groups((str(group) for group in groups), role_map)
    for role in Role:
        if role in wanted:
            grant_role(user, role, actor=actor)
        else:
            revoke_role(user, role, actor=actor)
    return user
