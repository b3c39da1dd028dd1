"""Pages for group rules: the list (every person reads it) and one rule with its breaches and,
for compliance, what it would have flagged over the fleet's last week (the what-if)."""

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from reconciliation.models import GroupBreach, GroupRule
from registry.choices import Role
from registry.roles import has_role
from runtime.whatif import what_if

RECENT_BREACHES = 20


@login_required
def group_rule_list(request: HttpRequest) -> HttpResponse:
    """Every group rule, what it selects and counts, and its breaches so far."""
    rules = list(GroupRule.objects.annotate(breach_count=Count("breaches")).order_by("name"))
    return render(request, "reconciliation/group_rules.html", {
        "rules": rules, "is_compliance": has_role(request.user, Role.COMPLIANCE),
        "sees_breaches": _sees_breaches(request.user)})


def _sees_breaches(user: object) -> bool:
    """Breaches name agents across owners: those who review every agent's findings see them
    (approvers, compliance), as for findings; an owner sees the rules only."""
    return has_role(user, Role.APPROVER, Role.COMPLIANCE)


@login_required
def group_rule_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One rule: its definition, recent breaches and (compliance) the what-if."""
    rule = GroupRule.objects.filter(name=name).first()
    if rule is None:
        raise Http404(f"No group rule {name!r}.")
    compliance = has_role(request.user, Role.COMPLIANCE)
    sees = _sees_breaches(request.user)
    breaches = (GroupBreach.objects.filter(rule=rule).order_by("-opened_at")[:RECENT_BREACHES]
                if sees else [])
    return render(request, "reconciliation/group_rule_detail.html", {
        "rule": rule, "breaches": breaches, "is_compliance": compliance, "sees_breaches": sees,
        "what_if": what_if(rule.to_spec()) if compliance else None})
