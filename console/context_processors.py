"""What every page's template knows about the signed-in person: their roles and the count
on the inbox badge."""

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from console.reconciliation_pages import inbox_counts
from registry.choices import Role
from registry.roles import user_roles


def roles_context(request: HttpRequest) -> dict[str, Any]:
    """Template context: the signed-in person's roles, and for approvers and owners how much
    waits in their inbox (counted only when a page shows it)."""
    roles = user_roles(getattr(request, "user", None))
    context: dict[str, Any] = {"my_roles": roles}
    if Role.APPROVER in roles or Role.OWNER in roles or Role.ADMIN in roles:
        context["nav_pending_count"] = SimpleLazyObject(
            lambda: inbox_counts(request.user)["total"])
    return context
