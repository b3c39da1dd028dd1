"""A console page rendered with what its navigation shows: approvers and owners see how many
items wait in their inbox."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.reconciliation_pages import inbox_counts
from registry.choices import Role
from registry.roles import has_role


def render_page(request: HttpRequest, template: str, context: dict[str, Any],
                status: int = 200) -> HttpResponse:
    """Render a page; approvers and owners also get the inbox count for the navigation."""
    if has_role(request.user, Role.APPROVER, Role.OWNER) and "nav_pending_count" not in context:
        context["nav_pending_count"] = inbox_counts(request.user)["total"]
    return render(request, template, context, status=status)
