"""The account area's notifications page (/account/notifications/): add or remove where you
hear about inbox items."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from audit.choices import AuditAction
from audit.models import AuditEntry
from config.errors import DomainError
from registry.actions import notifications
from registry.choices import NotifyChannel, NotifyMode
from registry.models import NotificationPreference
from registry.notification_api import visible


def failed_deliveries(preferences: list[NotificationPreference], limit: int = 20) -> list[dict]:
    """The newest sends to these addresses that did not go (a confirmation link or inbox items),
    from the audit trail, which records each failure with its reason."""
    by_target = {f"notification-preference:{p.pk}": p for p in preferences}
    entries = (AuditEntry.objects.filter(action=AuditAction.NOTIFICATION_FAILED,
                                         target__in=list(by_target)).order_by("-seq")[:limit])
    return [{"at": entry.at, "preference": by_target[entry.target],
             "what": ("the confirmation link" if (entry.after or {}).get("verification")
                      else ", ".join((entry.after or {}).get("items", [])) or "a notification"),
             "reason": entry.reason} for entry in entries]


@login_required
def notification_preferences(request: HttpRequest) -> HttpResponse:
    """List your preferences; the form adds one (email or webhook, immediate or digest)."""
    if request.method == "POST":
        try:
            preference = notifications.set_preference(
                actor=request.user, channel=request.POST.get("channel", ""),
                target=request.POST.get("target", "").strip()[:600],
                mode=request.POST.get("mode", NotifyMode.IMMEDIATE),
                team=request.POST.get("team", "").strip()[:80])
        except DomainError as error:
            messages.error(request, error.message)
        else:
            if failed_deliveries([preference], limit=1):  # sent on commit, before this line
                messages.warning(request, "Saved, but the confirmation could not be sent to that "
                                          "address: see Not delivered below.")
            else:
                messages.success(request, "Saved. A confirmation was sent to that address: "
                                          "follow its link; nothing else is sent there until "
                                          "then.")
        return redirect("notification-preferences")
    preferences = visible(request.user)
    return render(request, "registry/notifications.html", {
        "preferences": preferences, "failures": failed_deliveries(preferences),
        "channels": NotifyChannel.choices, "modes": NotifyMode.choices,
        "max_addresses": settings.NOTIFY_MAX_ADDRESSES})


@login_required
@require_POST
def notification_preference_delete(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        notifications.delete_preference(pk, actor=request.user)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Removed.")
    return redirect("notification-preferences")


@login_required
def notification_preference_verify(request: HttpRequest, pk: int) -> HttpResponse:
    """The link sent to a new address: a form to confirm it (a GET changes nothing), and the
    confirmation itself."""
    preference = NotificationPreference.objects.filter(pk=pk).first()
    if preference is None or not notifications.may_verify(preference, request.user):
        raise Http404("No such notification preference.")
    if request.method == "POST":
        try:
            notifications.verify_preference(pk, actor=request.user,
                                            token=request.POST.get("token", "")[:100])
        except DomainError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Confirmed: you will hear about inbox items at "
                                      f"{preference.target}.")
        return redirect("notification-preferences")
    return render(request, "registry/notification_verify.html", {
        "preference": preference, "token": request.GET.get("token", "")[:100]})
