"""The fleet view for compliance as a page: the snapshot the workers keep
(reconciliation/fleet_snapshot.py), with how old it is; `GET /api/v1/fleet` in
reconciliation/fleet_api.py serves the same."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gitsource.sync_status import fleet_summary as git_fleet_summary
from reconciliation import fleet_snapshot
from reconciliation.fleet import MAX_NAMES
from reconciliation.fleet_api import READERS
from registry.roles import has_role


@login_required
def fleet_page(request: HttpRequest) -> HttpResponse:
    """The same as a page, with the trend, silence and compliance charts."""
    if not has_role(request.user, *READERS):
        return render(request, "registry/forbidden.html", {
            "message": "The fleet view is for compliance staff, approvers and admins."},
            status=403)
    snapshot = fleet_snapshot.current()
    return render(request, "reconciliation/fleet.html", {
        "fleet": snapshot.fleet, "freshness": fleet_snapshot.freshness(snapshot),
        "max_names": MAX_NAMES, "git": git_fleet_summary()})
