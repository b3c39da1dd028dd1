"""Pages of the reconciliation app: the cluster overview (home)."""

import django_rq
import redis
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from audit.models import AuditChainHead, AuditCheckpoint
from config.observability import QUEUE_NAMES


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """The home page: the cluster at a glance, charts and counts that update live."""
    from reconciliation.dashboard import summary

    head = AuditChainHead.objects.filter(pk=1).first()
    last_checkpoint = AuditCheckpoint.objects.order_by("-seq").first()
    try:
        queues = {name: django_rq.get_queue(name).count for name in QUEUE_NAMES}
    except redis.RedisError:
        queues = None
    return render(request, "reconciliation/overview.html", {
        "head": head, "last_checkpoint": last_checkpoint, "queues": queues,
        "summary": summary()})


_PLOTLY_JS: bytes | None = None


def plotly_js(request: HttpRequest) -> HttpResponse:
    """plotly.js from the installed plotly package: the product never loads it from a CDN."""
    global _PLOTLY_JS
    if _PLOTLY_JS is None:
        from plotly.offline import get_plotlyjs

        _PLOTLY_JS = get_plotlyjs().encode()
    response = HttpResponse(_PLOTLY_JS, content_type="application/javascript")
    response["Cache-Control"] = "public, max-age=86400"
    return response

RECENT = 20


def agent_state_context(agent) -> dict:
    """The reconciler's side of an agent's page: conditions, the latest observation, and its
    recent findings, corrections, runs and open escalations (a fixed number of queries)."""
    import yaml

    from reconciliation.models import AgentStatus, Correction, Escalation, Finding, ReconcileRun

    status = AgentStatus.objects.filter(agent=agent).first()
    observation = agent.observations.order_by("-observed_at").first()
    return {
        "status": status,
        "observation": observation,
        "observed_yaml": yaml.safe_dump(observation.state, sort_keys=True)
        if observation else "",
        "findings": list(Finding.objects.filter(agent=agent).order_by("-last_seen")[:RECENT]),
        "corrections": list(Correction.objects.filter(agent=agent).select_related("finding")
                            .order_by("-created_at")[:RECENT]),
        "runs": list(ReconcileRun.objects.filter(agent=agent).order_by("-started_at")[:RECENT]),
        "escalations": list(Escalation.objects.filter(agent=agent, status="open")
                            .select_related("finding").order_by("opened_at")),
    }


@login_required
def escalations(request: HttpRequest) -> HttpResponse:
    """Open escalations for approvers: drift (revert / accept / suspend) and pending runtime
    decisions (allow / deny), oldest first, each resolved with a required comment."""
    from django.contrib import messages
    from django.shortcuts import redirect

    from config.errors import DomainError
    from reconciliation import actions
    from reconciliation.models import Escalation
    from registry.choices import Role
    from registry.roles import has_role

    if not has_role(request.user, Role.APPROVER, Role.COMPLIANCE):
        return render(request, "registry/forbidden.html",
                      {"message": "Escalations are for approvers and compliance staff."},
                      status=403)
    if request.method == "POST":
        try:
            escalation = actions.resolve_escalation(
                int(request.POST.get("escalation", "0") or 0), actor=request.user,
                resolution=request.POST.get("resolution", ""),
                comment=request.POST.get("comment", ""))
        except (DomainError, ValueError) as error:
            messages.error(request, getattr(error, "message", str(error)))
        else:
            messages.success(request, f"Escalation {escalation.pk} resolved: "
                                      f"{escalation.resolution}.")
        return redirect("escalations")
    rows = list(Escalation.objects.filter(status="open")
                .select_related("agent", "finding", "decision").order_by("opened_at")[:200])
    return render(request, "reconciliation/escalations.html", {
        "escalations": rows, "can_resolve": has_role(request.user, Role.APPROVER)})
