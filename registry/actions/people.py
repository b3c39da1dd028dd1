"""State changes for people: roles, accounts, tokens, sign-ins. Each writes its audit row."""

import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.client_address import client_address
from config.errors import Conflict, NotAllowed
from registry.choices import Lifecycle, Role
from registry.models import ApiToken, hash_token_key
from registry.password_changer import AUDITED_BY_CALLER, password_changed_by
from registry.roles import has_role


@transaction.atomic
def create_person(username: str, *, actor: Any, password: str | None = None,
                  email: str = "") -> tuple[User, str]:
    """Create a sign-in account; returns it with its password (random unless given)."""
    password = password or secrets.token_urlsafe(12)
    with password_changed_by(AUDITED_BY_CALLER):  # the creation's row says it was set
        user = User.objects.create_user(username=username, email=email, password=password)
    audit.record(actor=actor, action=AuditAction.USER_CREATED, target=f"user:{username}",
                 after={"username": username, "email": email, "password": "set"})
    return user, password


@transaction.atomic
def record_password_change(user: User, *, actor: Any) -> None:
    """Audit a changed password (never the password or its hash)."""
    audit.record(actor=actor, action=AuditAction.USER_PASSWORD_CHANGED,
                 target=f"user:{user.username}",
                 after={"usable": user.has_usable_password()})


ACCOUNT_FLAGS = ("is_active", "is_staff", "is_superuser")


def account_flags(user: User) -> dict[str, bool]:
    """The account switches that change what a person can do."""
    return {flag: getattr(user, flag) for flag in ACCOUNT_FLAGS}


@transaction.atomic
def set_account_flags(user: User, *, actor: Any, reason: str = "", **flags: bool) -> bool:
    """Change is_active / is_staff / is_superuser; False when nothing changed."""
    if set(flags) - set(ACCOUNT_FLAGS):
        raise ValueError(f"unknown account flags {sorted(set(flags) - set(ACCOUNT_FLAGS))}")
    user = User.objects.select_for_update(no_key=True).get(pk=user.pk)
    before = account_flags(user)
    after = {**before, **flags}
    if after == before:
        return False
    User.objects.filter(pk=user.pk).update(**flags)
    audit.record(actor=actor, action=AuditAction.USER_FLAGS_CHANGED,
                 target=f"user:{user.username}", before=before, after=after, reason=reason)
    return True


@transaction.atomic
def record_account_created(user: User, *, actor: Any) -> None:
    """Audit an account made outside create_person (Django's createsuperuser)."""
    audit.record(actor=actor, action=AuditAction.USER_CREATED, target=f"user:{user.username}",
                 after={"username": user.username, "email": user.email,
                        "password": "set" if user.has_usable_password() else "unusable",
                        **account_flags(user)})


@transaction.atomic
def grant_role(user: User, role: Role | str, *, actor: Any) -> bool:
    """Add a person to a role's group; False when they already held it."""
    role = Role(role)
    group, _ = Group.objects.get_or_create(name=role.value)
    if user.groups.filter(pk=group.pk).exists():
        return False
    before = sorted(user.groups.values_list("name", flat=True))
    user.groups.add(group)
    audit.record(actor=actor, action=AuditAction.ROLE_GRANTED, target=f"user:{user.username}",
                 before={"roles": before}, after={"roles": sorted([*before, role.value])})
    return True


@transaction.atomic
def revoke_role(user: User, role: Role | str, *, actor: Any) -> bool:
    """Remove a person from a role's group; False when they did not hold it."""
    role = Role(role)
    group = Group.objects.filter(name=role.value).first()
    if group is None or not user.groups.filter(pk=group.pk).exists():
        return False
    before = sorted(user.groups.values_list("name", flat=True))
    user.groups.remove(group)
    audit.record(actor=actor, action=AuditAction.ROLE_REVOKED, target=f"user:{user.username}",
                 before={"roles": before}, after={"roles": [r for r in before if r != role]})
    if role == Role.ADMIN:  # a superuser holds every role: the flag must go with the role
        set_account_flags(user, actor=actor, is_staff=False, is_superuser=False,
                          reason="admin role revoked")
    return True


def new_token_key() -> str:
    """A fresh API key (256 random bits). Never starting with '-': a command line would read
    `--token -x...` as another option (agentctl's argparse refused such a key)."""
    while (key := secrets.token_urlsafe(32)).startswith("-"):
        pass
    return key


@transaction.atomic
def issue_api_token(user: User, *, actor: Any, name: str = "",
                    expires_in_days: int | None = None) -> tuple[ApiToken, str]:
    """A new token for a person; the key is returned once and only its hash is stored."""
    key = new_token_key()
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    token = ApiToken.objects.create(user=user, name=name, key_hash=hash_token_key(key),
                                    key_prefix=key[:8], expires_at=expires_at)
    audit.record(
        actor=actor, action=AuditAction.TOKEN_ISSUED, target=f"user:{user.username}",
        after={"token": token.key_prefix, "name": name,
               "expires_at": expires_at.isoformat() if expires_at else None},
    )
    return token, key


@transaction.atomic
def issue_agent_token(agent: Any, *, actor: User, name: str = "",
                      expires_in_days: int | None = None) -> tuple[ApiToken, str]:
    """A token that acts as one agent only; its owner (or an admin) issues it."""
    if not (actor.pk == agent.owner_id or has_role(actor, Role.ADMIN)):
        raise NotAllowed("Only the agent's owner or an admin may issue its tokens.")
    if type(agent).objects.filter(pk=agent.pk, lifecycle=Lifecycle.RETIRED).exists():
        raise Conflict(f"{agent.name} is retired: it gets no new tokens.", code="retired")
    key = new_token_key()
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    token = ApiToken.objects.create(user=actor, agent=agent, name=name,
                                    key_hash=hash_token_key(key), key_prefix=key[:8],
                                    expires_at=expires_at)
    audit.record(
        actor=actor, action=AuditAction.AGENT_TOKEN_ISSUED, target=f"agent:{agent.name}",
        agent=agent.name,
        after={"token": token.key_prefix,
               "expires_at": expires_at.isoformat() if expires_at else None},
    )
    return token, key


def _client(request: Any) -> dict[str, str]:
    if request is None:
        return {}
    return {"ip": client_address(request),
            "user_agent": request.META.get("HTTP_USER_AGENT", "")[:200]}


@transaction.atomic
def record_sign_in(user: User, *, request: Any = None) -> None:
    """Audit a successful sign-in."""
    audit.record(actor=user, action=AuditAction.USER_SIGNED_IN, target=f"user:{user.username}",
                 after=_client(request))


@transaction.atomic
def record_sign_in_failure(username: str, *, request: Any = None, reason: str = "") -> None:
    """Audit a failed sign-in, naming the account that was tried (and, from single sign-on,
    why the provider's answer was refused)."""
    audit.record(actor="anonymous", action=AuditAction.USER_SIGN_IN_FAILED,
                 target=f"user:{username[:150]}", after=_client(request), reason=reason)


@transaction.atomic
def record_sign_out(user: User, *, request: Any = None) -> None:
    """Audit a sign-out."""
    audit.record(actor=user, action=AuditAction.USER_SIGNED_OUT, target=f"user:{user.username}",
                 after=_client(request))
