"""People's roles and who holds which, for every app's views and API permissions (templates
get them from console/context_processors.py). Each role is a Django group of the same name."""

from typing import Any

from django.db import models
from rest_framework.permissions import BasePermission


class Role(models.TextChoices):
    """The four roles; each is a Django group of the same name."""

    OWNER = "owner"
    APPROVER = "approver"
    COMPLIANCE = "compliance"
    ADMIN = "admin"


def user_roles(user: Any) -> frozenset[str]:
    """The role names a person holds (cached on the user object for the request)."""
    cached = getattr(user, "_role_names", None)
    if cached is not None:  # before `user.groups`, which builds a manager on every read
        return cached
    if not getattr(user, "is_authenticated", False) or not hasattr(user, "groups"):
        return frozenset()  # anonymous, or an agent's token: agents hold no person's role
    if user.is_superuser:
        cached = frozenset(Role.values)
    else:
        cached = frozenset(user.groups.filter(name__in=Role.values)
                           .values_list("name", flat=True))
    user._role_names = cached
    return cached


def has_role(user: Any, *roles: str) -> bool:
    """True when the person holds any of `roles` (admin holds every role)."""
    held = user_roles(user)
    return Role.ADMIN in held or any(role in held for role in roles)


class HasRole(BasePermission):
    """DRF permission: a signed-in person holding one of the view's `required_roles`."""

    message = "Your role does not allow this."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, *getattr(view, "required_roles", ()))
