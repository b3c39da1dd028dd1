"""The account area's notifications page (/account/notifications/): add or remove where you
hear about inbox items."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from config.errors import DomainError
from registry.actions import notifications
from registry.choices import NotifyChannel, NotifyMode
from registry.notification_api import visible


@login_required
def notification_preferences(request: HttpRequest) -> HttpResponse:
    """List your preferences; the form adds one (email or webhook, immediate or digest)."""
    if request.method == "POST":
        try:
            notifications.set_preference(
                actor=request.user, channel=request.POST.get("channel", ""),
                target=request.POST.get("target", "").strip()[:600],
                mode=request.POST.get("mode", NotifyMode.IMMEDIATE),
                team=request.POST.get("team", "").strip()[:80])
        except DomainError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, "Saved: you will hear about inbox items there.")
        return redirect("notification-preferences")
    return render(request, "registry/notifications.html", {
        "preferences": visible(request.user), "channels": NotifyChannel.choices,
        "modes": NotifyMode.choices})


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
