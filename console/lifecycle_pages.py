"""The pages' side of an approval's lifecycle: rolling back from the version history, and
granting a waiver from the agent page."""

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from config.errors import DomainError
from console.forms import RetireForm, RollbackForm, StepUpCodeForm, WaiverForm
from reconciliation.actions import approve_shadow
from registry import actions
from registry.actions.waivers import check_may_waive, may_waive
from registry.choices import Lifecycle, Role, VersionSource, VersionState, WaiverState
from registry.lifecycle_api import agent_for_proposer
from registry.models import Agent, Retirement, Waiver, WaiverRequest
from registry.roles import has_role, sees_operations
from registry.stepup import confirmed_device, retirement_reasons


def back(request: HttpRequest, name: str) -> HttpResponse:
    """Back to the inbox when the form was decided there, else to the agent's page."""
    target = request.POST.get("next", "")
    if target.startswith("/inbox/") and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(target)
    return redirect("registry-agent", name=name)


def refused(request: HttpRequest, name: str, check: Callable[[], Any]) -> HttpResponse | None:
    """Run `check` (who may act) before the form is read: a stranger is told "not yours",
    never what is wrong with the fields. The redirect to show, or None when allowed."""
    try:
        check()
    except DomainError as error:
        messages.error(request, error.message)
        return redirect("registry-agent", name=name)
    return None


@login_required
@require_POST
def agent_rollback(request: HttpRequest, name: str) -> HttpResponse:
    """Propose an earlier approved generation again; the proposal page shows its diff."""
    if answer := refused(request, name, lambda: agent_for_proposer(name, request.user)):
        return answer
    form = RollbackForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The rollback was not proposed: choose an approved generation.")
        return redirect("registry-agent", name=name)
    try:
        outcome = actions.propose_rollback(
            name, form.cleaned_data["generation"], actor=request.user,
            comment=form.cleaned_data["comment"], source=VersionSource.UI)
    except DomainError as error:
        messages.error(request, error.message)
        return redirect("registry-agent", name=name)
    messages.success(request, f"Proposed rolling {name} back to generation "
                              f"{form.cleaned_data['generation']} (proposal "
                              f"#{outcome.version.pk}); it needs approval like any change.")
    return redirect("registry-proposal", pk=outcome.version.pk)


@login_required
@require_POST
def agent_waive(request: HttpRequest, name: str) -> HttpResponse:
    """Grant a time-boxed waiver; the agent page lists it with its end."""
    if answer := refused(request, name, lambda: check_may_waive(
            get_object_or_404(Agent, name=name), request.user)):
        return answer
    form = WaiverForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The waiver was not granted: pointer, reason, ticket and "
                                "duration are all needed.")
        return redirect("registry-agent", name=name)
    try:
        waiver = actions.grant_waiver(name, actor=request.user, session=request.session,
                                      **form.cleaned_data)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        if waiver.state == WaiverState.PENDING:
            messages.success(request, f"Waiver on {waiver.pointer} recorded; it needs "
                                      f"{waiver.required_approvals} approvers, as the change it "
                                      "stands for would: a second approver puts it in force.")
        else:
            messages.success(request, f"Waived {waiver.pointer} on {name} until "
                                      f"{waiver.expires_at:%Y-%m-%d %H:%M:%S} UTC "
                                      f"({waiver.ticket}).")
    return redirect("registry-agent", name=name)


@login_required
@require_POST
def agent_waiver_request(request: HttpRequest, name: str) -> HttpResponse:
    """The owner asks for a waiver on a finding of their agent; an approver decides."""
    form = WaiverForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The waiver was not requested: pointer, reason, ticket and "
                                "duration are all needed.")
        return redirect("registry-agent", name=name)
    fields = {k: v for k, v in form.cleaned_data.items() if k != "otp"}
    try:
        asked = actions.request_waiver(name, actor=request.user, **fields)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Asked for a waiver on {asked.pointer} for {asked.duration}; "
                                  "an approver grants or declines it from their inbox.")
    return redirect("registry-agent", name=name)


@login_required
@require_POST
def waiver_request_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """An approver grants (as a waiver, judged as any) or declines an owner's request."""
    asked = WaiverRequest.objects.select_related("agent").filter(pk=pk).first()
    if asked is None:
        raise Http404("No such waiver request.")
    try:
        if request.POST.get("decision") == "grant":
            form = StepUpCodeForm(request.POST)
            otp = form.cleaned_data.get("otp", "") if form.is_valid() else ""
            waiver = actions.grant_waiver_request(pk, actor=request.user, otp=otp,
                                                  session=request.session)
            done = (f"Waiver on {waiver.pointer} granted; it needs "
                    f"{waiver.required_approvals} approvers in all." if
                    waiver.state == WaiverState.PENDING else
                    f"Waived {waiver.pointer} on {asked.agent.name} until "
                    f"{waiver.expires_at:%Y-%m-%d %H:%M} UTC.")
        else:
            actions.decline_waiver_request(pk, actor=request.user,
                                           comment=request.POST.get("comment", "")[:2000])
            done = f"Declined the waiver on {asked.pointer}."
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, done)
    return back(request, asked.agent.name)


@login_required
@require_POST
def waiver_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """A second approver puts a pending waiver in force."""
    form = StepUpCodeForm(request.POST)
    otp = form.cleaned_data.get("otp", "") if form.is_valid() else ""
    waiver = Waiver.objects.select_related("agent").filter(pk=pk).first()
    if waiver is None:
        raise Http404("No such waiver.")
    try:
        actions.confirm_waiver(pk, actor=request.user, otp=otp, session=request.session)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Waiver on {waiver.pointer} is in force.")
    return back(request, waiver.agent.name)


@login_required
@require_POST
def shadow_approve(request: HttpRequest, name: str) -> HttpResponse:
    """A second person puts the owner's requested shadow mode in force."""
    agent = get_object_or_404(Agent, name=name)
    try:
        approve_shadow(agent, actor=request.user)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Shadow mode for {name} is in force.")
    return back(request, name)


def waiver_context(agent: Agent, user: Any) -> dict[str, Any]:
    """The agent page's waivers: those in force (with their end) and whether `user` may grant."""
    now = timezone.now()
    if not sees_operations(user, agent):  # another owner: no more than its findings
        return {"waivers": [], "can_waive": False}
    return {"waivers": agent.waivers.filter(expires_at__gt=now).select_related("granted_by"),
            "can_waive": may_waive(agent, user),
            "can_request_waiver": has_role(user, Role.OWNER) and agent.owner_id == user.pk,
            "waiver_requests": agent.waiver_requests.select_related(
                "decided_by", "requested_by")[:20]}


@login_required
@require_POST
def agent_retire(request: HttpRequest, name: str) -> HttpResponse:
    """The owner proposes retiring the agent."""
    if answer := refused(request, name, lambda: agent_for_proposer(name, request.user)):
        return answer
    form = RetireForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The retirement was not proposed: say why.")
        return redirect("registry-agent", name=name)
    try:
        actions.propose_retirement(name, actor=request.user, reason=form.cleaned_data["reason"])
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Proposed retiring {name}; an approver carries it out.")
    return redirect("registry-agent", name=name)


@login_required
@require_POST
def retirement_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """An approver retires the agent."""
    retirement = Retirement.objects.select_related("agent").filter(pk=pk).first()
    if retirement is None:
        raise Http404
    form = StepUpCodeForm(request.POST)
    otp = form.cleaned_data["otp"] if form.is_valid() else ""
    try:
        actions.approve_retirement(pk, actor=request.user, otp=otp, session=request.session)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Retired {retirement.agent.name}.")
    return back(request, retirement.agent.name)


def retirement_context(agent: Agent, user: Any) -> dict[str, Any]:
    """The agent page's retirement: the pending one, and who may propose or approve it."""
    pending = agent.retirements.filter(state=VersionState.PENDING).select_related(
        "proposed_by").first()
    return {"retirement": pending,
            "can_retire": agent.lifecycle != Lifecycle.RETIRED and pending is None
            and has_role(user, Role.OWNER)
            and (agent.owner_id == user.pk or has_role(user, Role.ADMIN)),
            "can_approve_retirement": pending is not None and has_role(user, Role.APPROVER)
            and user.pk not in (pending.proposed_by_id, agent.owner_id),
            "retirement_step_up": retirement_reasons() if pending is not None else [],
            "enrolled": pending is not None and confirmed_device(user) is not None}
