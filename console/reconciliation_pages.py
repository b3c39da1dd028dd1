"""Pages of the reconciliation app: the cluster overview (home)."""

from datetime import timedelta

import redis
import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from audit.models import AuditChainHead, AuditCheckpoint, AuditEntry
from config import queues as rq_queues
from config.errors import DomainError
from config.observability import QUEUE_NAMES
from reconciliation import actions
from reconciliation.actions import desired_now
from reconciliation.alerts import recent
from reconciliation.choices import OPEN_STATUSES, FindingStatus
from reconciliation.compare import TRANSITIONS, Transition, side_by_side, timeline
from reconciliation.dashboard import summary
from reconciliation.filters import FindingFilterSet
from reconciliation.inbox import counts_for
from reconciliation.models import AgentStatus, Correction, Escalation, Finding, ReconcileRun
from reconciliation.timeline_chart import timeline_figure
from registry.choices import Lifecycle, Role
from registry.models import Agent
from registry.recertification_report import due_for_owner
from registry.roles import has_role
from sandbox.lab import inject, mass_drift

FEED_HISTORY = 20  # alerts drawn with the overview, so a fresh tab's feed is never empty


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """The home page: the cluster at a glance, charts and counts that update live."""
    head = AuditChainHead.objects.filter(pk=1).first()
    last_checkpoint = AuditCheckpoint.objects.order_by("-seq").first()
    try:
        depths = {name: rq_queues.queue(name).count for name in QUEUE_NAMES}
    except redis.RedisError:
        depths = None
    return render(request, "reconciliation/overview.html", {
        "head": head, "last_checkpoint": last_checkpoint, "queues": depths,
        "summary": summary(), "recent_alerts": recent(request.user, FEED_HISTORY),
        "reviews_due": due_for_owner(request.user)})


RECENT = 20
TIMELINES = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}
TIMELINE_STEPS = 10_000  # transitions drawn at most; before the oldest of them: not shown


def compliance_timeline(agent, now, span: timedelta) -> list:
    """In or out of policy over the span, from what changes it (findings opened and closed,
    suspensions, as audited) worked back from the state now: a stable converged agent is one
    solid in-policy span however long ago its last pass ran (four queries)."""
    start = now - span
    # Entries are numbered in the order they are written, at the time they are written: the
    # window starts at the first seq after `start` (found on the `at` index).
    first_seq = (AuditEntry.objects.filter(at__gt=start).order_by("at")
                 .values_list("seq", flat=True).first())
    steps = [] if first_seq is None else [
        Transition(at, action, target, (before or {}).get("status"))
        for at, action, target, before in AuditEntry.objects.filter(
            agent=agent.name, seq__gte=first_seq, action__in=TRANSITIONS)
        .order_by("-seq").values_list("at", "action", "target", "before")[:TIMELINE_STEPS]]
    first_run = (ReconcileRun.objects.filter(agent=agent).order_by("started_at")
                 .values_list("started_at", flat=True).first())
    known = [t for t in (first_run, steps[-1].at if steps else None) if t is not None]
    if len(steps) == TIMELINE_STEPS:
        known = [steps[-1].at]  # too many changes to draw further back
    return timeline(
        now=now, span=span, judged_since=min(known) if known else None,
        open_findings=set(Finding.objects.filter(agent=agent, status__in=OPEN_STATUSES)
                          .values_list("pk", flat=True)),
        suspended=agent.lifecycle == Lifecycle.SUSPENDED, transitions=steps,
        retired=agent.lifecycle == Lifecycle.RETIRED)


MIN_TIMELINE = timedelta(minutes=10)


def agent_state_context(agent, timeline_span: str = "24h") -> dict:
    """The reconciler's side of an agent's page: conditions, the latest observation, its
    compliance timeline, and its recent findings, corrections, runs and open escalations (a
    fixed number of queries)."""
    status = AgentStatus.objects.filter(agent=agent).first()
    observation = agent.observations.order_by("-observed_at").first()
    now = timezone.now()
    desired = None
    if agent.active_version_id:
        desired = desired_now(agent, now)
        desired.pop("enforcement", None)
    span = timeline_span if timeline_span in TIMELINES else "24h"
    # Never before the agent existed: a young agent's chart is its whole life, not a week of
    # "not known" with its history a sliver at the end.
    lived = max(now - agent.created_at, MIN_TIMELINE)
    shown = min(TIMELINES[span], lived)
    segments = compliance_timeline(agent, now, shown)
    comparison = side_by_side(desired, observation.state) if desired and observation else []
    return {
        "comparison": comparison,
        "differences": [row for row in comparison if row.tag != "equal"],
        "timeline": segments,
        "timeline_chart": timeline_figure(
            [(agent.name, segments)], now=now, span=shown,
            title=f"{agent.name}: in or out of policy (last {span})" if shown == TIMELINES[span]
            else f"{agent.name}: in or out of policy (since it was registered, "
                 f"{agent.created_at:%Y-%m-%d %H:%M} UTC)"),
        "timeline_span": span, "timeline_spans": list(TIMELINES),
        "status": status,
        "conditions": status.conditions_for(agent) if status else [],
        "observation": observation,
        "observed_yaml": yaml.safe_dump(observation.state, sort_keys=True)
        if observation else "",
        "findings": list(Finding.objects.filter(agent=agent).order_by("-last_seen")[:RECENT]),
        "open_statuses": [str(s) for s in OPEN_STATUSES],
        "corrections": list(Correction.objects.filter(agent=agent).select_related("finding")
                            .order_by("-created_at")[:RECENT]),
        "runs": list(ReconcileRun.objects.filter(agent=agent).order_by("-started_at")[:RECENT]),
        "escalations": list(Escalation.objects.filter(agent=agent, status="open")
                            .select_related("finding").order_by("opened_at")),
    }


def _forbidden(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "registry/forbidden.html", {"message": message}, status=403)


@login_required
def findings(request: HttpRequest) -> HttpResponse:
    """Findings for compliance: filter, acknowledge with a reason, follow to the audit trail.
    Approvers read them all; an owner reads their own agents' (what caused their drift). With
    a cause, the page first says what that change touched: every agent, with its count."""
    reviewer = has_role(request.user, Role.COMPLIANCE, Role.APPROVER)
    if not (reviewer or has_role(request.user, Role.OWNER)):
        return _forbidden(request, "Findings are for compliance staff, approvers and owners.")
    if request.method == "POST":
        try:
            actions.acknowledge_finding(int(request.POST.get("finding") or 0),
                                        actor=request.user,
                                        reason=request.POST.get("reason", ""))
        except (DomainError, ValueError, Finding.DoesNotExist) as error:
            messages.error(request, getattr(error, "message", "No such finding."))
        else:
            messages.success(request, "Finding acknowledged.")
        return redirect(request.get_full_path())
    filters = {key: request.GET.get(key, "").strip() for key in FindingFilterSet.base_filters}
    visible = Finding.objects.all() if reviewer else Finding.objects.filter(
        agent__owner=request.user)
    found = FindingFilterSet({k: v for k, v in filters.items() if v},
                             queryset=visible.select_related("agent", "acknowledged_by")
                             .order_by("-last_seen", "-pk"))
    rows = found.qs if found.is_valid() else Finding.objects.none()
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    compliance = has_role(request.user, Role.COMPLIANCE)
    touched = (list(Finding.objects.filter(cause_key=filters["cause"]).values("agent__name")
                    .annotate(count=Count("pk")).order_by("agent__name"))
               if filters["cause"] and found.is_valid() else [])
    return render(request, "reconciliation/findings.html", {
        "touched": touched, "reviewer": reviewer,
        "page": page, "filters": filters, "statuses": FindingStatus.values,
        "query": query.urlencode(), "can_acknowledge": compliance,
        "can_explore_audit": compliance, "errors": found.errors})


@login_required
def lab(request: HttpRequest) -> HttpResponse:
    """The drift lab: inject drift and faults into the demo's sandbox agents."""
    if not has_role(request.user, Role.COMPLIANCE, Role.ADMIN):
        return _forbidden(request, "The drift lab is for compliance staff and admins.")
    agents = list(Agent.objects.filter(connector__type="sandbox", active_version__isnull=False)
                  .select_related("active_version").order_by("name"))
    if request.method == "POST":
        what = request.POST.get("what", "")
        try:
            if what == "mass":
                done = mass_drift(int(request.POST.get("count") or 10), actor=request.user)
                messages.success(request, f"Bad deployment across {len(done)} agents.")
            else:
                agent = next((a for a in agents if a.name == request.POST.get("agent")), None)
                if agent is None:
                    raise ValueError("Choose a sandbox agent.")
                messages.success(request, inject(
                    agent, what, actor=request.user,
                    after_changes=int(request.POST.get("after") or 1),
                    lag_seconds=int(request.POST.get("seconds") or 20)))
        except (DomainError, ValueError) as error:
            messages.error(request, getattr(error, "message", str(error)))
        return redirect("lab")
    return render(request, "reconciliation/lab.html", {"agents": agents})


def inbox_counts(user) -> dict[str, int]:
    """What waits for `user` to decide: proposals, escalations (an incident counts once) and
    pending runtime decisions, leaving out what four eyes keeps from them and what they
    already approved (reconciliation.inbox.counts_for)."""
    return counts_for(user)
