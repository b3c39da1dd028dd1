"""The fleet view for compliance: one page and `GET /api/v1/fleet` (reconciliation/fleet.py
holds what they show)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reconciliation.fleet import fleet_view
from registry.api import IsPerson
from registry.choices import Role
from registry.roles import HasRole, has_role

READERS = (Role.COMPLIANCE, Role.APPROVER, Role.ADMIN)


class FleetView(APIView):
    """`GET /api/v1/fleet`: every rule with the agents it covers, its current violations and
    trend, the agents no rule covers, and the agents silent now."""

    permission_classes = [IsPerson, HasRole]
    required_roles = READERS

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response(fleet_view())


@login_required
def fleet_page(request: HttpRequest) -> HttpResponse:
    """The same as a page, with the trend and silence charts."""
    if not has_role(request.user, *READERS):
        return render(request, "registry/forbidden.html", {
            "message": "The fleet view is for compliance staff, approvers and admins."},
            status=403)
    return render(request, "reconciliation/fleet.html", {"fleet": fleet_view()})
