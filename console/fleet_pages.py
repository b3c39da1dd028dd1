"""The fleet view for compliance as a page (reconciliation/fleet.py holds what it shows;
`GET /api/v1/fleet` in reconciliation/fleet_api.py serves the same)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from reconciliation.fleet import fleet_view
from reconciliation.fleet_api import READERS
from registry.roles import has_role


@login_required
def fleet_page(request: HttpRequest) -> HttpResponse:
    """The same as a page, with the trend and silence charts."""
    if not has_role(request.user, *READERS):
        return render(request, "registry/forbidden.html", {
            "message": "The fleet view is for compliance staff, approvers and admins."},
            status=403)
    return render(request, "reconciliation/fleet.html", {"fleet": fleet_view()})
