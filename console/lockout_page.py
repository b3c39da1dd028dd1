"""Sign-in limits, enforced by django-axes on every way in (the site's form, /admin/login/, and
any later path that calls `authenticate(request, ...)`): after too many failures for one
account from one client address, every attempt for that pair is refused with 429 for the
cool-off, the right password included. Failures are counted in the database (axes' database
handler), which every web process shares and which does not need Redis. Axes refuses an
`authenticate()` call without a request, so a path that forgets it fails closed."""

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from config.api_errors import error_body


def locked_out(request: HttpRequest, original_response: HttpResponse | None = None,
               credentials: dict | None = None) -> HttpResponse:
    """The 429 every sign-in path answers while its account and address are locked out."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    message = (f"Too many failed sign-ins for this account from this address. "
               f"Try again in {minutes} minutes.")
    if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
        return JsonResponse(error_body(429, message), status=429)
    form = AuthenticationForm(request, initial={"username": (credentials or {}).get("username")})
    return render(request, "registration/login.html",
                  {"form": form, "rate_limited": True, "lockout_minutes": minutes}, status=429)

