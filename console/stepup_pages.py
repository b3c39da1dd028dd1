"""The person's own page for enrolling an authenticator app used for step-up approvals."""

from base64 import b32encode

import segno
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import SafeString, mark_safe
from django_otp.plugins.otp_totp.models import TOTPDevice

from config.errors import DomainError
from console.forms import EnrolForm
from registry.actions.stepup import confirm_device, start_enrolment
from registry.stepup import confirmed_device


def qr_code_svg(uri: str) -> SafeString:
    """The otpauth:// link as an inline SVG QR code for the app's camera: drawn here, so nothing
    leaves the product; dark on white with the four-module quiet zone, whatever the page's
    colours, and presentation attributes only (no inline style for the CSP to refuse)."""
    svg = segno.make(uri, error="m").svg_inline(
        scale=5, border=4, dark="#000", light="#fff", svgclass="qr-code",
        title="QR code of the key, for the authenticator app's camera")
    return mark_safe(svg.replace("<svg ", '<svg role="img" aria-label="QR code of the key" ', 1))


def _render(request: HttpRequest, form: EnrolForm | None = None,
            status: int = 200) -> HttpResponse:
    pending = TOTPDevice.objects.filter(user=request.user, confirmed=False).order_by(
        "-pk").first()
    return render(request, "registry/two_factor.html", {
        "device": confirmed_device(request.user),
        "pending": pending,
        "secret": b32encode(pending.bin_key).decode() if pending else "",
        "qr_code": qr_code_svg(pending.config_url) if pending else "",
        "form": form,
    }, status=status)


@login_required
def two_factor(request: HttpRequest) -> HttpResponse:
    """Show the person's authenticator; POST `start` makes a new secret, POST `confirm` checks
    a code from it and makes it the one step-up asks for."""
    if request.method != "POST":
        return _render(request)
    if "start" in request.POST:
        start_enrolment(actor=request.user)
        return redirect("registry-two-factor")
    form = EnrolForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Type the six-digit code your app shows.")
        return _render(request, form, status=400)
    try:
        confirm_device(form.cleaned_data["device"], actor=request.user,
                       code=form.cleaned_data["code"],
                       current_code=form.cleaned_data["current_code"])
    except DomainError as error:
        messages.error(request, error.message)
        return _render(request, form, status=error.status)
    messages.success(request, "Your authenticator is enrolled: approvals that need step-up "
                              "will ask for its code.")
    return redirect("registry-two-factor")
