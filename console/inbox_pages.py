"""The inbox page (/inbox/): bob's one queue, one line per item (kind, agent, what, urgency,
age, assignee), most urgent first, filtered by kind, agent and team, each expanded on demand to
decide it in place (a proposal with its permission changes and diff above the approve button,
as on its own page); bulk assign and acknowledge; an incident (the escalations one cause
produced) decided with one decision. The nav's Approvals and Escalations are this page
filtered. The actions decide; a refusal comes back as a message on the page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from config.errors import DomainError
from console.registry_pages import proposal_cards
from reconciliation import actions, inbox
from reconciliation.choices import Resolution
from registry.choices import Role
from registry.models import Agent
from registry.roles import has_role
from registry.stepup import confirmed_device, retirement_reasons

SORTS = {
    "urgency": inbox.by_urgency,
    "age": inbox.by_age,
    "agent": lambda i: (i.agent, i.deadline, i.key),
    "kind": lambda i: (inbox.KINDS.index(i.kind), i.deadline, i.key),
}
PAGE_SIZE = 50  # as every list page; an incident is one line, never split across two pages
TABS = (("", "All"), (inbox.DECISION, "Decisions"), (inbox.INCIDENT, "Incidents"),
        (inbox.ESCALATION, "Escalations"), (inbox.PROPOSAL, "Proposals"),
        (inbox.RETIREMENT, "Retirements"), (inbox.WAIVER, "Waivers"),
        (inbox.SHADOW, "Shadow requests"), (inbox.RECERTIFICATION, "Recertifications"))


def _matches(entry: inbox.Entry, kind: str, agents: set[str] | None) -> bool:
    """The filters: the kind (Escalations holds the incidents too: an incident is escalations
    one cause produced) and the agents of the chosen name or team."""
    return ((not kind or entry.kind == kind
             or (kind == inbox.ESCALATION and entry.kind == inbox.INCIDENT))
            and (agents is None or entry.agent in agents))


def _agents_filter(queue: list[inbox.Entry], agent: str, team: str) -> set[str] | None:
    """The agent names the agent and team filters leave (None: no such filter)."""
    if not agent and not team:
        return None
    names = {e.agent for e in queue}
    if agent:
        names &= {agent}
    if team:
        names &= set(Agent.objects.filter(name__in=names, labels__team=team)
                     .values_list("name", flat=True))
    return names


def _teams() -> list[str]:
    """Every team an agent is labelled with, for the team filter."""
    return sorted({t for t in Agent.objects.exclude(labels__team=None)
                   .values_list("labels__team", flat=True).distinct() if isinstance(t, str)})


def _forbidden(request: HttpRequest) -> HttpResponse:
    return render(request, "registry/forbidden.html",
                  {"message": "The inbox is for approvers and owners."}, status=403)


@login_required
def inbox_page(request: HttpRequest) -> HttpResponse:
    """The queue this approver decides (and an owner's reminders to recertify their agents),
    sorted by urgency unless they chose another column."""
    if not has_role(request.user, Role.APPROVER, Role.OWNER):
        return _forbidden(request)
    kind = request.GET.get("kind", "")
    kind = kind if kind in inbox.KINDS else ""
    sort = request.GET.get("sort", "urgency")
    sort = sort if sort in SORTS else "urgency"
    agent, team = request.GET.get("agent", "").strip(), request.GET.get("team", "").strip()
    now = timezone.now()
    queue = inbox.queue_for(request.user, now)  # the counts are the whole queue's, every tab
    counts = inbox.tally(queue)
    agents = _agents_filter(queue, agent, team)
    page = Paginator(sorted((e for e in queue if _matches(e, kind, agents)), key=SORTS[sort]),
                     PAGE_SIZE).get_page(request.GET.get("page"))
    items = inbox.items(page.object_list)
    cards = proposal_cards([i.version for i in items if i.version is not None], request.user)
    enrolled = confirmed_device(request.user) is not None
    for item in items:
        item.left = item.seconds_left(now)
        item.left_text = inbox.time_left(item.left)
        item.resolutions = (item.escalations[0].resolutions()
                            if item.escalations else [])
        item.card = cards.get(item.version.pk) if item.version is not None else None
    query = request.GET.copy()
    query.pop("page", None)
    filters = request.GET.copy()
    for key in ("page", "kind"):
        filters.pop(key, None)
    return render(request, "registry/inbox.html", {
        "items": items, "page": page, "base_query": query.urlencode(),
        "filter_query": filters.urlencode(),
        "counts": counts, "kind": kind, "sort": sort, "agent": agent, "team": team,
        "queue_agents": sorted({e.agent for e in queue}), "teams": _teams(),
        "tabs": TABS if has_role(request.user, Role.APPROVER) else TABS[:1] + TABS[-1:],
        "approver": has_role(request.user, Role.APPROVER), "sorts": list(SORTS),
        "here": request.get_full_path(), "enrolled": enrolled,
        "retirement_step_up": retirement_reasons(),
        "mine": inbox.proposals_by(request.user) if has_role(request.user, Role.OWNER) else [],
        "nav_pending_count": counts["total"]})


def _back(request: HttpRequest) -> HttpResponse:
    target = request.POST.get("next", "")
    if not (target.startswith(("/inbox/", "/approvals/")) and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure())):
        target = "/inbox/"
    return redirect(target)


@login_required
@require_POST
def inbox_triage(request: HttpRequest) -> HttpResponse:
    """Assign to me and/or acknowledge the ticked items (all or none)."""
    if not has_role(request.user, Role.APPROVER):
        return _forbidden(request)
    raw = request.POST.getlist("escalation")
    ids = [int(v) for v in raw if v.isascii() and v.isdigit()]
    what = request.POST.get("bulk", "")
    if len(ids) != len(raw) or what not in ("assign", "acknowledge"):
        messages.error(request, "Tick the items, then choose Assign to me or Acknowledge.")
        return _back(request)
    try:
        done = actions.triage_many(ids, actor=request.user, assign=what == "assign",
                                   acknowledge=what == "acknowledge")
    except DomainError as error:
        messages.error(request, error.message)
    else:
        verb = "assigned to you" if what == "assign" else "acknowledged"
        messages.success(request, f"{len(done)} escalation{'s' if len(done) != 1 else ''} "
                                  f"{verb}.")
    return _back(request)


@login_required
@require_POST
def incident_resolve(request: HttpRequest, pk: int) -> HttpResponse:
    """One decision, with a comment, for every escalation of the incident."""
    if not has_role(request.user, Role.APPROVER):
        return _forbidden(request)
    resolution = request.POST.get("resolution", "")
    comment = request.POST.get("comment", "")[:2000]
    try:
        actions.authorise_escalation(pk, actor=request.user)
        if resolution not in Resolution.values:
            raise DomainError("Choose one of the resolutions.")
        resolved = actions.resolve_incident(pk, actor=request.user, resolution=resolution,
                                            comment=comment)
    except DomainError as error:
        messages.error(request, f"Incident #{pk}: {error.message}")
    else:
        count = len(resolved)
        messages.success(request, f"Incident #{pk} decided: {resolution} for {count} "
                                  f"escalation{'s' if count != 1 else ''}.")
    return _back(request)
