"""The registry's pages: agents, the apply form, the approvals inbox, proposals, guardrails and
tokens.

Views validate input and call registry.actions; a refused action (a DomainError) is shown to the
person and has changed nothing.
"""

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from audit.jsondiff import Change, flat_changes
from audit.models import AuditEntry
from config.errors import Conflict, DomainError, NotFound
from console.agent_summary import summary_context
from console.editor_templates import copy_of, starter
from console.escalation_pages import escalation_form_context, with_row_errors
from console.forms import DecisionForm, GuardrailForm, ManifestForm, selector_to_text
from console.lifecycle_pages import retirement_context, waiver_context
from console.page_render import render_page
from console.recertification_pages import lifecycle_context
from console.reconciliation_pages import agent_state_context
from gitsource.sync_status import for_agent as git_sync_status
from reconciliation import inbox
from reconciliation.agent_filters import AgentStateFilterSet
from reconciliation.choices import Health
from reconciliation.models import AgentStatus, Escalation
from reconciliation.sync import Sync, health_and_sync
from registry import actions
from registry.api import agent_queryset
from registry.choices import Lifecycle, Role, VersionSource, VersionState
from registry.intake import read_manifests
from registry.manifest import (
    FieldError,
    Manifest,
    ManifestError,
    locate,
    manifest_to_yaml,
    parse_documents,
)
from registry.models import Agent, Approval, DesiredStateVersion, Guardrail
from registry.review_thread import may_read, thread
from registry.roles import has_role, sees_operations
from registry.stepup import confirmed_device, proposal_reasons
from runtime.behaviour_api import run_backtest
from runtime.models import BehaviourEvent
from sources.readings import readings_for

PAGE_SIZE = 50
HISTORY_SIZE = 100
AUDIT_SIZE = 50
EVENTS_SIZE = 50  # the latest; the API pages through the rest
FILTER_FIELDS = tuple(AgentStateFilterSet.base_filters)


def _forbidden(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "registry/forbidden.html", {"message": message}, status=403)


def _current_approvals() -> Prefetch:
    return Prefetch("approvals", queryset=Approval.objects.select_related("approver")
                    .order_by("created_at"))


def _approvers(version: DesiredStateVersion) -> list[str]:
    """Who approved the version's current revision (from the prefetched approvals)."""
    return [a.approver.username for a in version.approvals.all() if a.revision == version.revision]


def _query_without(request: HttpRequest, key: str) -> str:
    query = request.GET.copy()
    query.pop(key, None)
    return query.urlencode()


# --- agents ------------------------------------------------------------------------------------


@login_required
def agent_list(request: HttpRequest) -> HttpResponse:
    """Every agent, filtered as the API filters them, 50 to a page."""
    # An empty form field means "any", not "blank", so it is left out before validation.
    given = {key: request.GET[key].strip() for key in FILTER_FIELDS
             if request.GET.get(key, "").strip()}
    params = AgentStateFilterSet(given, queryset=agent_queryset())
    if params.is_valid():
        agents: QuerySet[Agent] = params.qs.select_related("git").defer(
            "active_version__spec", "active_version__metadata",
            "active_version__guardrail_results",
            "active_version__permission_changes").order_by("name")
        errors: dict[str, Any] = {}
    else:
        agents, errors = Agent.objects.none(), params.errors
    page = Paginator(agents, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [(agent, *health_and_sync(agent)) for agent in page]
    return render_page(request, "registry/agent_list.html", {
        "page": page, "rows": rows, "filters": given, "errors": errors,
        "lifecycles": Lifecycle.choices, "healths": Health.choices, "syncs": Sync.choices,
        "base_query": _query_without(request, "page"),
    })


def _manifest_yaml(agent: Agent, version: DesiredStateVersion) -> str:
    """The version as a full manifest document, ready to edit and apply again."""
    meta = version.metadata
    return manifest_to_yaml(Manifest(
        name=agent.name, owner=meta.get("owner", agent.owner.username),
        labels=meta.get("labels", {}), description=meta.get("description", ""),
        spec=version.spec, spec_sha256=version.spec_sha256))


def _may_propose_for(user: Any, agent: Agent) -> bool:
    return has_role(user, Role.OWNER) and (agent.owner_id == user.pk or has_role(user, Role.ADMIN))


@login_required
def agent_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One agent: metadata, the active spec, its version history, proposals and recent audit."""
    agent = get_object_or_404(Agent.objects.select_related("owner", "active_version",
                                                           "git__source"), name=name)
    versions = list(
        agent.versions.select_related("proposed_by", "decided_by")
        .prefetch_related(_current_approvals()).order_by("-created_at")[: HISTORY_SIZE + 1])
    history = [(version, _approvers(version)) for version in versions[:HISTORY_SIZE]]
    pending = list(agent.versions.filter(state=VersionState.PENDING)
                   .select_related("proposed_by").order_by("-created_at"))
    operations = sees_operations(request.user, agent)
    entries = list(AuditEntry.objects.filter(agent=agent.name).defer("before", "after")
                   .order_by("-seq")[:AUDIT_SIZE]) if operations else []
    events = list(BehaviourEvent.objects.filter(agent=agent).defer("attributes")
                  .order_by("-ts", "-pk")[:EVENTS_SIZE]) if operations else []
    # another owner sees the status any person sees in /api/v1/agents/{name}, nothing more
    state = agent_state_context(agent, request.GET.get("timeline", "24h")) if operations else {
        "status": AgentStatus.objects.filter(agent=agent).first()}
    return render_page(request, "registry/agent_detail.html", {
        "agent": agent,
        "active_yaml": _manifest_yaml(agent, agent.active_version)
        if agent.active_version else "",
        "history": history,
        "history_truncated": len(versions) > HISTORY_SIZE,
        "pending": pending,
        "entries": entries,
        "events": events,
        "can_propose": _may_propose_for(request.user, agent),
        "git_sync": git_sync_status(agent),
        "permission_sources": readings_for(agent) if operations else [],
        "can_explore_audit": has_role(request.user, Role.COMPLIANCE),
        "sees_operations": operations,
        **summary_context(agent, operations=operations),
        **state,
        **waiver_context(agent, request.user),
        **retirement_context(agent, request.user),
        **lifecycle_context(agent, request.user, sees_operations=operations, pending=pending),
        "can_fetch_evidence": has_role(request.user, Role.COMPLIANCE) or (
            has_role(request.user, Role.OWNER) and agent.owner_id == request.user.pk),
    })


# --- applying manifests ------------------------------------------------------------------------


@dataclass
class Problem:
    """One error of an upload, with the source line it points at when that is known."""

    line: int | None
    pointer: str
    message: str


@dataclass
class SourceLine:
    """One line of the sent manifest and the errors on it; number None stands for skipped lines."""

    number: int | None
    text: str = ""
    problems: list[str] = field(default_factory=list)


SOURCE_IN_FULL = 400  # longer uploads show only the lines around their errors
SOURCE_CONTEXT = 3


def _line_of(text: str, error: DomainError, pointer: str) -> int | None:
    """The line of a pointer the action reported without one (an owner or guardrail refusal)."""
    try:
        documents = parse_documents(text)
    except ManifestError:
        return None
    if len(documents) != 1:
        # Several documents: refusals name their agent first ("refund-agent: ...").
        documents = [d for d in documents if isinstance(d.data, dict)
                     and isinstance(d.data.get("metadata"), dict)
                     and error.message.startswith(f"{d.data['metadata'].get('name')}:")]
    if len(documents) != 1:
        return None
    return locate([FieldError(pointer, "")], documents[0])[0].line


def _problems(text: str, error: DomainError) -> list[Problem]:
    problems = []
    for detail in error.details:
        pointer = detail.get("pointer") or ""
        line = detail.get("line")
        if line is None and pointer:
            line = _line_of(text, error, pointer)
        problems.append(Problem(line, pointer or "/", str(detail.get("message", ""))))
    return problems


def _source(text: str, problems: list[Problem]) -> list[SourceLine]:
    lines = [SourceLine(number, line) for number, line in enumerate(text.splitlines(), 1)]
    for problem in problems:
        if problem.line and lines:
            # A syntax error at the end of the text points one past the last line.
            lines[min(problem.line, len(lines)) - 1].problems.append(
                f"{problem.pointer}: {problem.message}")
    if len(lines) <= SOURCE_IN_FULL:
        return lines
    near = {n for line in lines if line.problems
            for n in range(line.number - SOURCE_CONTEXT, line.number + SOURCE_CONTEXT + 1)}
    shown: list[SourceLine] = []
    for line in lines:
        if line.number in near:
            shown.append(line)
        elif not shown or shown[-1].number is not None:
            shown.append(SourceLine(None))
    return shown


@login_required
def manifest_apply(request: HttpRequest) -> HttpResponse:
    """Owners paste YAML manifests: register agents and propose new versions, or dry-run."""
    if not has_role(request.user, Role.OWNER):
        return _forbidden(request, "Only owners apply manifests.")
    context: dict[str, Any] = {"text": "", "dry_run": False, "results": None, "error": None,
                               "problems": [], "source": []}
    if request.method == "POST":
        form = ManifestForm(request.POST)
        form.is_valid()  # every field is optional: the manifest's own checks follow
        text, dry_run = form.cleaned_data["manifest"], form.cleaned_data["dry_run"]
        reason = form.cleaned_data.get("reason", "")
        context.update(text=text, dry_run=dry_run, reason=reason)
        try:
            authorise = partial(actions.check_can_apply, actor=request.user)
            outcomes = actions.apply_manifests(read_manifests(text, authorise=authorise),
                                               actor=request.user,
                                               source=VersionSource.UI, dry_run=dry_run,
                                               comment=reason)
        except DomainError as error:
            problems = _problems(text, error)
            context.update(error=error.message, problems=problems,
                           source=_source(text, problems))
        else:
            context["results"] = [o.to_dict(dry_run=dry_run) for o in outcomes]
    elif request.GET.get("agent"):
        # "Propose a change" on an agent's page starts from its active manifest.
        agent = (Agent.objects.select_related("owner", "active_version")
                 .filter(name=request.GET["agent"]).first())
        if agent is not None and agent.active_version is not None:
            context["text"] = _manifest_yaml(agent, agent.active_version)
    elif request.GET.get("copy"):
        # "Copy" on an agent's page: its approved manifest as a new agent the copier owns.
        agent = (Agent.objects.select_related("owner", "active_version")
                 .filter(name=request.GET["copy"]).first())
        if agent is not None and agent.active_version is not None:
            context["text"] = copy_of(agent, request.user.username)
    else:  # "New agent": a starter to fill in
        context["text"] = starter(request.user.username)
    return render_page(request, "registry/manifest_apply.html", context)


# --- proposals and the approvals inbox ---------------------------------------------------------


@dataclass
class ProposalCard:
    """A proposal as an approver reviews it."""

    version: DesiredStateVersion
    approvers: list[str]
    diff: list[Change]
    stale: bool
    may_decide: bool
    why_not: str
    may_withdraw: bool
    step_up: list[str] = field(default_factory=list)  # why approving needs a second factor
    enrolled: bool = False  # the viewer has a confirmed authenticator


def _card(version: DesiredStateVersion, user: Any, enrolled: bool | None = None) -> ProposalCard:
    """`enrolled` (whether `user` has a confirmed device), when a page of cards read it once."""
    agent = version.agent
    active = agent.active_version.spec if agent.active_version_id else None
    pending = version.state == VersionState.PENDING
    why_not = ""
    if not has_role(user, Role.APPROVER):
        why_not = "Only approvers decide on proposals."
    elif version.proposed_by_id == user.pk:
        why_not = "Four eyes: you made this proposal, so another approver decides."
    elif version.token_holder_id == user.pk:
        why_not = ("Four eyes: the agent made this with a token you hold, so another approver "
                   "decides.")
    elif agent.owner_id == user.pk:
        why_not = "Four eyes: you own this agent, so another approver decides."
    elif user.username in _approvers(version):
        why_not = "You approved this revision; it waits for another approver."
    step_up = (proposal_reasons(version.risk, version.guardrail_results)
               if pending and not why_not else [])
    return ProposalCard(
        version=version,
        approvers=_approvers(version),
        diff=flat_changes(active, version.spec),
        stale=pending and version.base_generation != agent.generation,
        may_decide=pending and not why_not,
        why_not=why_not if pending else "",
        may_withdraw=pending and version.proposed_by_id == user.pk,
        step_up=step_up,
        enrolled=bool(step_up) and (confirmed_device(user) is not None if enrolled is None
                                    else enrolled),
    )


def _proposals() -> QuerySet[DesiredStateVersion]:
    return DesiredStateVersion.objects.select_related(
        "agent__owner", "agent__active_version", "proposed_by", "decided_by",
    ).prefetch_related(_current_approvals())


def proposal_cards(versions: list[DesiredStateVersion], user: Any) -> dict[int, ProposalCard]:
    """The cards of these proposals (the inbox's page of them, read without their specs), by
    id, with their diffs: one query for all, and the viewer's authenticator read once."""
    if not versions:
        return {}
    enrolled = confirmed_device(user) is not None
    return {v.pk: _card(v, user, enrolled)
            for v in _proposals().filter(pk__in=[v.pk for v in versions])}


@dataclass
class InboxItem:
    """One place in the approvals queue: a proposal card or an escalation card (for an
    incident, its first escalation with the siblings one cause produced, decided once)."""

    entry: inbox.Item
    card: ProposalCard | None = None
    escalation: Any = None
    siblings: list = field(default_factory=list)


@login_required
def approvals_inbox(request: HttpRequest) -> HttpResponse:
    """The queue this approver may act on (not the global one: four eyes keeps their own
    agents and proposals out), longest waiting first: pending proposals (approve or reject
    with the diff in view), escalations (assign, acknowledge, snooze, resolve; an incident's
    escalations as one card, decided once, as the inbox folds them) and pending runtime
    decisions (allow or deny), each decided in place; every form comes back here with a
    message."""
    if not has_role(request.user, Role.APPROVER):
        return _forbidden(request, "The approvals inbox is for approvers.")
    queue = inbox.queue_for(request.user)
    page = Paginator(sorted((e for e in queue if e.kind != inbox.RECERTIFICATION),
                            key=inbox.by_age), PAGE_SIZE).get_page(request.GET.get("page"))
    lines = inbox.items(page.object_list)
    versions = {v.pk: v for v in _proposals().filter(
        pk__in=[i.version.pk for i in lines if i.version is not None])}
    with_row_errors(request, [i.escalations[0] for i in lines if i.escalations])
    enrolled = confirmed_device(request.user) is not None  # once for the page, not per card
    items = [InboxItem(i, card=_card(versions[i.version.pk], request.user, enrolled))
             if i.version is not None else InboxItem(i, escalation=i.escalations[0],
                                                     siblings=i.escalations[1:])
             for i in lines if i.escalations or (i.version and i.version.pk in versions)]
    counts = inbox.tally(queue)
    return render_page(request, "registry/approvals.html", {
        "page": page, "items": items, "here": request.get_full_path(),
        "base_query": _query_without(request, "page"), "counts": counts,
        "snoozed": Escalation.objects.snoozed().count(),
        "nav_pending_count": counts["total"], **escalation_form_context(request),
    })


@login_required
def proposal_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One proposal, in any state, with the decision or withdraw forms where they apply."""
    version = get_object_or_404(_proposals(), pk=pk)
    card = _card(version, request.user)
    return render_page(request, "registry/proposal_detail.html", {
        "card": card, "here": request.get_full_path(),
        # the review thread: for the people involved only
        "thread": thread(version) if may_read(request.user, version) else None,
        "may_request_changes": card.may_decide,
        "spec_yaml": _manifest_yaml(version.agent, version),
        # the backtest replays the agent's events: for its owner and the reviewers only
        "backtest": run_backtest(version) if sees_operations(request.user, version.agent)
        else None,
    })


def _back(request: HttpRequest, pk: int) -> HttpResponse:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        target = reverse("registry-proposal", args=[pk])
    return redirect(target)


def _decision_form(request: HttpRequest, pk: int, decision: str) -> DecisionForm | HttpResponse:
    """An approver's valid decision form for proposal `pk`, or the page that says why not
    (who may decide is checked before the form is judged)."""
    if not has_role(request.user, Role.APPROVER):
        return _forbidden(request, "Only approvers decide on proposals.")
    try:
        actions.check_can_decide(pk, actor=request.user)
    except DomainError as error:
        messages.error(request, error.message)
        return _back(request, pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"The {decision} was not sent: the comment is too long.")
        return _back(request, pk)
    return form


@login_required
@require_POST
def proposal_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """Add the approver's approval; enough of them activate the proposal."""
    form = _decision_form(request, pk, "approval")
    if isinstance(form, HttpResponse):
        return form
    try:
        version = actions.approve_proposal(
            pk, actor=request.user, comment=form.cleaned_data["comment"],
            expected_generation=form.cleaned_data["expected_generation"],
            otp=form.cleaned_data["otp"], session=request.session)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        if version.state == VersionState.APPROVED:
            messages.success(request, f"Approved proposal #{pk}: {version.agent.name} is now at "
                                      f"generation {version.generation}.")
        else:
            messages.success(request, f"Approved proposal #{pk}; it needs "
                                      f"{version.required_approvals} approvals in all.")
    return _back(request, pk)


@login_required
@require_POST
def proposal_reject(request: HttpRequest, pk: int) -> HttpResponse:
    """Refuse the proposal with a comment the proposer will read."""
    form = _decision_form(request, pk, "rejection")
    if isinstance(form, HttpResponse):
        return form
    try:
        actions.reject_proposal(pk, actor=request.user, comment=form.cleaned_data["comment"])
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Rejected proposal #{pk}.")
    return _back(request, pk)


@login_required
@require_POST
def proposal_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    """The proposer takes the proposal back."""
    try:
        actions.withdraw_proposal(pk, actor=request.user)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Withdrew proposal #{pk}.")
    return _back(request, pk)


# --- guardrails --------------------------------------------------------------------------------


@login_required
def guardrail_list(request: HttpRequest) -> HttpResponse:
    """Every guardrail; compliance staff also get the links to change them."""
    return render_page(request, "registry/guardrail_list.html", {
        "guardrails": Guardrail.objects.order_by("name"),
        "can_edit": has_role(request.user, Role.COMPLIANCE),
    })


def _refused(form: GuardrailForm, error: DomainError) -> None:
    """Put a refusal next to the fields it names (with the CEL parser's line and column)."""
    if isinstance(error, Conflict) and error.code == "exists" and "name" in form.fields:
        form.add_error("name", error.message)
        return
    placed = False
    for detail in error.details:
        name = (detail.get("pointer") or "").strip("/")
        if name in form.fields:
            message = str(detail.get("message", ""))
            if detail.get("line"):
                message += f" (line {detail['line']}, column {detail.get('column')})"
            form.add_error(name, message)
            placed = True
    if not placed:
        form.add_error(None, error.message)


@login_required
def guardrail_create(request: HttpRequest) -> HttpResponse:
    """Compliance staff add a guardrail; it is saved only when its CEL expression is sound."""
    if not has_role(request.user, Role.COMPLIANCE):
        return _forbidden(request, "Only compliance staff manage guardrails.")
    form = GuardrailForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            guardrail = actions.create_guardrail(actor=request.user, **form.action_fields())
        except DomainError as error:
            _refused(form, error)
        else:
            messages.success(request, f"Created guardrail {guardrail.name}.")
            return redirect("registry-guardrails")
    return render_page(request, "registry/guardrail_form.html", {"form": form, "guardrail": None})


@login_required
def guardrail_edit(request: HttpRequest, name: str) -> HttpResponse:
    """Compliance staff change a guardrail (its name stays)."""
    if not has_role(request.user, Role.COMPLIANCE):
        return _forbidden(request, "Only compliance staff manage guardrails.")
    guardrail = get_object_or_404(Guardrail, name=name)
    initial = {**guardrail.to_dict(), "selector": selector_to_text(guardrail.selector),
               "safe_tools": ", ".join(guardrail.safe_tools)}
    form = GuardrailForm(request.POST or None, initial=initial, editing=True)
    if request.method == "POST" and form.is_valid():
        try:
            actions.update_guardrail(guardrail, actor=request.user, **form.action_fields())
        except DomainError as error:
            _refused(form, error)
        else:
            messages.success(request, f"Saved guardrail {guardrail.name}.")
            return redirect("registry-guardrails")
    return render_page(request, "registry/guardrail_form.html",
                       {"form": form, "guardrail": guardrail})


@login_required
def guardrail_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Ask, then delete a guardrail on a confirming POST."""
    if not has_role(request.user, Role.COMPLIANCE):
        return _forbidden(request, "Only compliance staff manage guardrails.")
    guardrail = get_object_or_404(Guardrail, name=name)
    if request.method == "POST":
        try:
            actions.delete_guardrail(guardrail, actor=request.user)
        except DomainError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Deleted guardrail {name}.")
        return redirect("registry-guardrails")
    return render_page(request, "registry/guardrail_delete.html", {"guardrail": guardrail})


# --- tokens ------------------------------------------------------------------------------------


def _issuable(user: Any) -> list[str]:
    """The agents `user` may issue a token for: their own, not retired."""
    return list(Agent.objects.filter(owner=user).exclude(lifecycle=Lifecycle.RETIRED)
                .order_by("name").values_list("name", flat=True)[:500])


@login_required
def token_list(request: HttpRequest, issued: dict | None = None) -> HttpResponse:
    """Your tokens and your agents' tokens (every token for admin), to revoke or keep; an
    owner issues a token for one of their agents here (its key shown once)."""
    tokens = actions.visible_tokens(request.user)
    return render_page(request, "registry/token_list.html", {
        "tokens": tokens[:500], "me": request.user, "issuable": _issuable(request.user),
        "issued": issued})


@login_required
@require_POST
def token_issue(request: HttpRequest) -> HttpResponse:
    """Issue a token for one of your agents; the key is in this response only (never stored,
    never in a redirect's session message)."""
    name = request.POST.get("agent", "")
    agent = Agent.objects.filter(name=name).first()
    label = request.POST.get("name", "").strip()[:100]
    try:
        if agent is None:
            raise NotFound(f"No agent named {name[:63]!r}.")
        token, key = actions.issue_agent_token(agent, actor=request.user, name=label)
    except DomainError as error:
        messages.error(request, error.message)
        return redirect("registry-tokens")
    return token_list(request, issued={"agent": agent.name, "key": key,
                                       "prefix": token.key_prefix})


def _token_change(request: HttpRequest, change: Any, done: str) -> HttpResponse:
    try:
        token = change()
    except NotFound as error:
        raise Http404(error.message) from None
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{done} token {token.key_prefix}….")
    return redirect("registry-tokens")


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke a token at once."""
    reason = request.POST.get("reason", "")[:500]
    return _token_change(
        request, lambda: actions.revoke_api_token(pk, actor=request.user, reason=reason),
        "Revoked")


@login_required
@require_POST
def token_keep(request: HttpRequest, pk: int) -> HttpResponse:
    """The agent's new owner keeps a token its previous owner held."""
    return _token_change(request, lambda: actions.keep_agent_token(pk, actor=request.user),
                         "Kept")
