"""Who holds which role, for views and API permissions (templates get it from
console/context_processors.py)."""

from typing import Any

from rest_framework.permissions import BasePermission

from registry.choices import Role


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


def sees_everything(user: Any) -> bool:
    """Approvers, compliance and admins review every agent, so they see all of it."""
    return has_role(user, Role.APPROVER, Role.COMPLIANCE)


def sees_operations(user: Any, agent: Any) -> bool:
    """Whether a person sees what an agent does and what was done to it: observed state,
    findings, corrections, runs, escalations, decisions, events, its audit rows and alerts
    about it. Its owner and the reviewers do; another owner sees only what any person sees
    (metadata, specs, proposals, status), as the README's roles table says."""
    return sees_everything(user) or (has_role(user, Role.OWNER)
                                     and agent.owner_id == getattr(user, "pk", None))


class HasRole(BasePermission):
    """DRF permission: a signed-in person holding one of the view's `required_roles`."""

    message = "Your role does not allow this."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, *getattr(view, "required_roles", ()))
