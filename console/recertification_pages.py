"""The pages of recertification and of the lifecycle's later steps: the review-date report
(with compliance's intervals), recertifying from the agent page, withdrawing a waiver,
rejecting a retirement, and the agent page's lifecycle history."""

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from audit.choices import AuditAction
from audit.models import AuditEntry
from config.errors import DomainError
from console.lifecycle_pages import back, refused
from console.page_render import render_page
from registry import actions
from registry.actions.waivers import may_withdraw
from registry.choices import Lifecycle, RiskLevel, Role, VersionSource
from registry.lifecycle_api import agent_for_proposer
from registry.models import Agent, Retirement, Waiver
from registry.recertification import (
    format_seconds,
    intervals,
    review_override,
    review_seconds,
)
from registry.recertification_report import STATES, report, state_of, to_csv
from registry.roles import has_role

# The audit actions that make an agent's lifecycle, shown on its page with who, when and why.
LIFECYCLE_ACTIONS = (
    AuditAction.AGENT_REGISTERED, AuditAction.PROPOSAL_CREATED, AuditAction.PROPOSAL_APPROVED,
    AuditAction.PROPOSAL_REJECTED, AuditAction.VERSION_ACTIVATED, AuditAction.ROLLBACK_PROPOSED,
    AuditAction.GRANT_STARTED, AuditAction.RECERTIFICATION_PROPOSED,
    AuditAction.RECERTIFICATION_DUE, AuditAction.RECERTIFICATION_OVERDUE,
    AuditAction.AGENT_RECERTIFIED, AuditAction.WAIVER_GRANTED, AuditAction.WAIVER_LAPSED,
    AuditAction.WAIVER_WITHDRAWN, AuditAction.RETIREMENT_PROPOSED,
    AuditAction.RETIREMENT_REJECTED, AuditAction.AGENT_RETIRED, AuditAction.AGENT_STOPPED,
    AuditAction.AGENT_STOP_FAILED, AuditAction.AGENT_SUSPENDED, AuditAction.AGENT_RESUMED,
)
LIFECYCLE_SIZE = 50


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=2000)


class CommentForm(forms.Form):
    comment = forms.CharField(max_length=2000)


class RecertifyForm(forms.Form):
    comment = forms.CharField(max_length=2000, required=False)
    review_after = forms.CharField(max_length=16, required=False)


class IntervalForm(forms.Form):
    interval = forms.CharField(max_length=16)
    risk_from = forms.IntegerField(min_value=1, max_value=10_000, required=False)


def lifecycle_context(agent: Agent, user: Any, *, sees_operations: bool,
                      pending: list[Any]) -> dict[str, Any]:
    """The agent page's review date, whether `user` may recertify or withdraw waivers, and the
    lifecycle history from the audit trail (for those who see the agent's operations);
    `pending` is the agent's pending proposals, already read for the page."""
    now = timezone.now()
    history = list(AuditEntry.objects.filter(agent=agent.name, action__in=LIFECYCLE_ACTIONS)
                   .defer("before", "after").order_by("-seq")[:LIFECYCLE_SIZE]
                   ) if sees_operations else []
    recertifying = next((v for v in pending if v.recertifies), None)  # the page's pending list
    return {
        "review_state": state_of(agent, now) if agent.review_due_at else "",
        "recertification_pending": recertifying,
        "can_recertify": agent.active_version_id is not None and recertifying is None
        and agent.lifecycle != Lifecycle.RETIRED and has_role(user, Role.OWNER)
        and (agent.owner_id == user.pk or has_role(user, Role.ADMIN)),
        "can_withdraw_waivers": may_withdraw(agent, user),
        "lifecycle_history": history,
    }


@login_required
@require_POST
def agent_recertify(request: HttpRequest, name: str) -> HttpResponse:
    """The owner proposes the active state again to reset its review date."""
    if answer := refused(request, name, lambda: agent_for_proposer(name, request.user)):
        return answer
    form = RecertifyForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The recertification was not proposed: check the fields.")
        return redirect("registry-agent", name=name)
    try:
        outcome = actions.propose_recertification(
            name, actor=request.user, comment=form.cleaned_data["comment"],
            review=review_override({"review_after": form.cleaned_data["review_after"]}),
            source=VersionSource.UI)
    except DomainError as error:
        messages.error(request, error.message)
        return redirect("registry-agent", name=name)
    messages.success(request, f"Proposed recertifying {name} (proposal "
                              f"#{outcome.version.pk}); it needs approval like any change.")
    return redirect("registry-proposal", pk=outcome.version.pk)


@login_required
@require_POST
def waiver_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    """End a waiver before its expiry; the agent is enforced again at once."""
    waiver = Waiver.objects.select_related("agent").filter(pk=pk).first()
    if waiver is None:
        raise Http404
    form = ReasonForm(request.POST)
    try:
        if not form.is_valid():
            raise DomainError("The waiver was not withdrawn: say why.")
        actions.withdraw_waiver(pk, actor=request.user, reason=form.cleaned_data["reason"])
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Withdrew the waiver on {waiver.pointer}; it is enforced "
                                  "again.")
    return redirect("registry-agent", name=waiver.agent.name)


@login_required
@require_POST
def retirement_reject(request: HttpRequest, pk: int) -> HttpResponse:
    """An approver refuses a proposed retirement, saying why."""
    retirement = Retirement.objects.select_related("agent").filter(pk=pk).first()
    if retirement is None:
        raise Http404
    form = CommentForm(request.POST)
    try:
        if not form.is_valid():
            raise DomainError("The retirement was not rejected: say why.")
        actions.reject_retirement(pk, actor=request.user, comment=form.cleaned_data["comment"])
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Rejected retiring {retirement.agent.name}.")
    return back(request, retirement.agent.name)


@login_required
def recertification_report(request: HttpRequest) -> HttpResponse:
    """Agents by review date (owners: their own), with a CSV export; compliance also sets the
    review interval of each risk level here."""
    state = request.GET.get("state", "")
    if state not in ("", *STATES):
        state = ""
    rows = report(request.user, state=state)
    if request.GET.get("format") == "csv":
        response = HttpResponse(to_csv(rows), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="recertification.csv"'
        return response
    table = intervals()
    return render_page(request, "registry/recertification.html", {
        "rows": rows, "state": state, "states": STATES,
        "intervals": [{"level": level, "interval": format_seconds(table[level]["seconds"]),
                       "risk_from": table[level]["risk_from"]} for level in RiskLevel.values],
        "can_set_intervals": has_role(request.user, Role.COMPLIANCE),
    })


@login_required
@require_POST
def interval_set(request: HttpRequest, level: str) -> HttpResponse:
    """Compliance sets one risk level's review interval."""
    form = IntervalForm(request.POST)
    try:
        if not form.is_valid():
            raise DomainError("The interval was not changed: check the fields.")
        seconds = review_seconds(form.cleaned_data["interval"])
        current = intervals().get(level, {"risk_from": 0})
        actions.set_review_interval(
            level, seconds=seconds, actor=request.user,
            risk_from=form.cleaned_data["risk_from"] or current["risk_from"])
    except ValueError as error:
        messages.error(request, f"The interval was not changed: {error}")
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{level}-risk agents are now reviewed every "
                                  f"{format_seconds(seconds)}.")
    return redirect("registry-recertification")
