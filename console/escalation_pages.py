"""The escalation pages: /escalations/ and the escalation cards of the approvals inbox, whose
forms post to /escalations/<id>/triage and /resolve and come back to the page they were on.
The actions decide; refusals are shown at the card they are about."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from config.errors import DomainError
from console.escalation_forms import SNOOZE_PRESETS, ResolveForm, TriageForm, snooze_bounds
from reconciliation import actions
from reconciliation.models import Escalation
from registry.choices import Role
from registry.roles import has_role

PAGE_SIZE = 50  # as every list page


def _not_for_you(request: HttpRequest) -> HttpResponse | None:
    """Escalations are shown to approvers and compliance staff only (the actions then decide
    who may act on which one)."""
    if has_role(request.user, Role.APPROVER, Role.COMPLIANCE):
        return None
    return render(request, "registry/forbidden.html",
                  {"message": "Escalations are for approvers and compliance staff."},
                  status=403)


@login_required
def escalations(request: HttpRequest) -> HttpResponse:
    """Open escalations for approvers: drift (revert / accept / suspend) and pending runtime
    decisions (allow / deny), oldest first, 50 to a page, each resolved with a required
    comment."""
    if (forbidden := _not_for_you(request)) is not None:
        return forbidden
    if request.method == "POST":
        # The forms post to /escalations/<id>/...; this keeps older clients of the page working.
        raw = request.POST.get("escalation", "")
        pk = int(raw) if raw.isascii() and raw.isdigit() else 0  # "²".isdigit(), too
        return (escalation_triage if request.POST.get("triage") else escalation_resolve)(
            request, pk)
    show_snoozed = request.GET.get("snoozed") == "1"
    rows = (Escalation.objects.filter(status="open") if show_snoozed
            else Escalation.objects.awake())
    page = Paginator(rows.select_related("agent", "finding", "decision", "assignee")
                     .order_by("opened_at", "pk"), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "reconciliation/escalations.html", {
        "escalations": with_row_errors(request, Escalation.read_for_offers(list(page))),
        "page": page,
        "base_query": query.urlencode(), "show_snoozed": show_snoozed,
        "snoozed": Escalation.objects.snoozed().count(),
        **escalation_form_context(request)})


def escalation_form_context(request: HttpRequest) -> dict:
    """What the shared escalation card needs besides the escalation (see _escalation.html)."""
    earliest, latest = snooze_bounds()
    return {"can_resolve": has_role(request.user, Role.APPROVER),
            "here": request.get_full_path(), "snooze_presets": [
                (key, label) for key, (label, _) in SNOOZE_PRESETS.items()],
            "snooze_min": earliest, "snooze_max": latest}


def _row_tag(pk: int) -> str:
    return f"escalation-{pk}"


def with_row_errors(request: HttpRequest, rows: list) -> list:
    """Attach to each escalation the errors its last form post left and the fields they are
    about (shown at its card, as well as at the top of the page)."""
    errors: dict[str, list[str]] = {}
    fields: dict[str, set[str]] = {}
    for message in messages.get_messages(request):
        tags = (message.extra_tags or "").split()
        for tag in (t for t in tags if t.startswith("escalation-")):
            errors.setdefault(tag, []).append(str(message))
            fields.setdefault(tag, set()).update(t[6:] for t in tags if t.startswith("field-"))
    for row in rows:
        row.errors = errors.get(_row_tag(row.pk), [])
        row.error_fields = fields.get(_row_tag(row.pk), set())
    return rows


def _back(request: HttpRequest, pk: int) -> HttpResponse:
    """Back to the page the form was on (this site's only), at the escalation's card."""
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        target = reverse("escalations")
    return redirect(f"{target.split('#')[0]}#esc-{pk}" if pk else target)


# Which form field a refusal is about, by the pointer the action names or the form field.
_FIELDS = {"/snooze_until": "until", "/comment": "comment", "until": "until",
           "comment": "comment", "/resolution": "resolution", "resolution": "resolution"}


def _refused(request: HttpRequest, pk: int, text: str, about: list[str]) -> None:
    fields = " ".join(f"field-{_FIELDS[name]}" for name in about if name in _FIELDS)
    messages.error(request, f"Escalation #{pk}: {text}",
                   extra_tags=f"{_row_tag(pk)} {fields}".strip())


def _form_refused(request: HttpRequest, pk: int, form) -> None:
    _refused(request, pk, " ".join(str(error) for errors in form.errors.values()
                                   for error in errors), list(form.errors))


def _action_refused(request: HttpRequest, pk: int, error) -> None:
    _refused(request, pk, error.message, [d.get("pointer", "") for d in error.details])


@login_required
@require_POST
def escalation_triage(request: HttpRequest, pk: int) -> HttpResponse:
    """Assign to me, acknowledge, or snooze one escalation; back to the page it was on."""
    if (forbidden := _not_for_you(request)) is not None:
        return forbidden
    try:  # who may, and whether it exists, before what was sent
        actions.authorise_escalation(pk, actor=request.user, triage=True)
    except DomainError as error:
        _action_refused(request, pk, error)
        return _back(request, pk)
    form = TriageForm(request.POST)
    if not form.is_valid():
        _form_refused(request, pk, form)
        return _back(request, pk)
    try:
        escalation = actions.triage_escalation(pk, actor=request.user,
                                               **form.action_arguments())
    except DomainError as error:
        _action_refused(request, pk, error)
    else:
        choice = form.cleaned_data["triage"]
        done = ("assigned to you" if choice == "assign" else "acknowledged"
                if choice == "acknowledge" else
                f"snoozed until {escalation.snoozed_until:%Y-%m-%d %H:%M} UTC; it comes back "
                "to the queue by itself then")
        messages.success(request, f"Escalation #{pk} {done}.")
    return _back(request, pk)


@login_required
@require_POST
def escalation_resolve(request: HttpRequest, pk: int) -> HttpResponse:
    """Resolve one escalation with one of its resolutions and a comment; back to the page."""
    if (forbidden := _not_for_you(request)) is not None:
        return forbidden
    try:  # who may, and whether it exists, before what was sent
        actions.authorise_escalation(pk, actor=request.user, triage=False)
    except DomainError as error:
        _action_refused(request, pk, error)
        return _back(request, pk)
    form = ResolveForm(request.POST)
    if not form.is_valid():
        _form_refused(request, pk, form)
        return _back(request, pk)
    try:
        escalation = actions.resolve_escalation(pk, actor=request.user,
                                                **form.cleaned_data)
    except DomainError as error:
        _action_refused(request, pk, error)
    else:
        messages.success(request, f"Escalation {escalation.pk} resolved: "
                                  f"{escalation.resolution}.")
    return _back(request, pk)
