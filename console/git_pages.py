"""The page of a policy proposal from Git: the commit, its test cases, the plan from the rules
in force to the folder's, what it would have flagged over the last week, and (for a compliance
person other than its committer) approve and reject."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from config.errors import DomainError
from console.page_render import render_page
from console.registry_pages import _forbidden
from gitsource import actions
from gitsource.api import policy_change_body
from gitsource.models import PolicyChange
from registry.choices import Role
from registry.roles import has_role


@login_required
def policy_change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One policy change and, while it waits, its what-if."""
    change = (PolicyChange.objects.select_related("source", "proposed_by", "decided_by")
              .filter(pk=pk).first())
    if change is None:
        raise Http404(f"No policy change {pk}.")
    body = policy_change_body(change, request.user)
    can_decide = (change.state == "pending" and has_role(request.user, Role.COMPLIANCE)
                  and request.user.pk != change.proposed_by_id)
    return render_page(request, "registry/policy_change.html", {
        "change": change, "body": body, "can_decide": can_decide})


@login_required
@require_POST
def policy_change_decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    """Approve (and apply) or reject a policy change."""
    if not has_role(request.user, Role.COMPLIANCE):
        return _forbidden(request, "Only compliance staff decide on policy changes.")
    decide = actions.approve_policy_change if decision == "approve" else (
        actions.reject_policy_change)
    try:
        change = decide(pk, actor=request.user, comment=request.POST.get("comment", ""))
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Policy change {change.pk} {change.state}.")
    return redirect("git-policy-change-page", pk=pk)
