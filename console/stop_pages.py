"""The stop button on the overview: press it, ask to lift a stop, approve a lift (a second
person). Each form calls the same action as the API and comes back to the overview."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from compliance import actions
from config.errors import DomainError

SCOPE_FIELDS = {"team": "team", "owner": "owner"}


def _refused(request: HttpRequest, error: DomainError) -> HttpResponse:
    pointers = [d.get("pointer", "") for d in error.details if d.get("pointer")]
    messages.error(request, error.message + (f" ({', '.join(pointers)})" if pointers else ""))
    return redirect("home")


def _selector(text: str) -> dict[str, str] | str:
    """`env=prod, tier=1` as labels, or the text itself (the action says what is wrong)."""
    labels = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            return text
        labels[key.strip()] = value.strip()
    return labels


@login_required
@require_POST
def stop_place(request: HttpRequest) -> HttpResponse:
    """Press stop: the fleet, a team, a label selector or one owner's agents."""
    scope = request.POST.get("scope", "")
    fields = {}
    if scope in SCOPE_FIELDS:
        fields[SCOPE_FIELDS[scope]] = request.POST.get("target", "").strip()
    elif scope == "selector":
        fields["selector"] = _selector(request.POST.get("target", ""))
    try:
        stop = actions.place_stop(actor=request.user, scope=scope,
                                  reason=request.POST.get("reason", ""), **fields)
    except DomainError as error:
        return _refused(request, error)
    messages.success(request, f"Stopped {stop.describe()}: {len(stop.agents)} agent(s) "
                              "suspended, every decision denied.")
    return redirect("home")


@login_required
@require_POST
def stop_lift(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask to lift a stop; a second person approves."""
    try:
        stop = actions.request_lift(pk, actor=request.user,
                                    reason=request.POST.get("reason", ""))
    except DomainError as error:
        return _refused(request, error)
    messages.success(request, f"Lift of stop {stop.pk} asked for: a second person approves it.")
    return redirect("home")


@login_required
@require_POST
def stop_lift_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve a lift someone else asked for: the stopped agents run again."""
    try:
        stop = actions.approve_lift(pk, actor=request.user)
    except DomainError as error:
        return _refused(request, error)
    messages.success(request, f"Stop {stop.pk} lifted: {stop.describe()} runs again.")
    return redirect("home")
