"""`GET /api/v1/fleet`: the fleet view for compliance as JSON (reconciliation/fleet.py holds
what it shows; the page shows the same)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reconciliation.fleet import fleet_view
from registry.api import IsPerson
from registry.choices import Role
from registry.roles import HasRole

READERS = (Role.COMPLIANCE, Role.APPROVER, Role.ADMIN)


class FleetView(APIView):
    """`GET /api/v1/fleet`: every rule with the agents it covers, its current violations and
    trend, the agents no rule covers, and the agents silent now."""

    permission_classes = [IsPerson, HasRole]
    required_roles = READERS

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response(fleet_view())
